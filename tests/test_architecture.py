"""The engine never imports Textual: the UI observes it. Checked at run time, in a fresh interpreter."""

import subprocess
import sys

ENGINE = [
    "inspector.stream.sse",
    "inspector.stream.protocol",
    "inspector.stream.assembler",
    "inspector.stream.diagnostics",
    "inspector.agent.observations",
    "inspector.agent.executor",
    "inspector.agent.loop",
    "inspector.sessions.sources",
    "inspector.record.recording",
    "inspector.record.recorder",
    "inspector.record.replay",
    "inspector.cli.headless",
    "inspector.scenarios.bundled",
    "inspector.scenarios.transport",
    "inspector.agent.toolbox.builtin",
]


def test_engine_modules_do_not_import_textual():
    code = (
        "import importlib, sys\n"
        f"for m in {ENGINE!r}: importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"engine imported: {out.stdout.strip()}"


def test_headless_dump_does_not_import_textual(tmp_path):
    sse = tmp_path / "s.sse"
    sse.write_bytes(b'event: ping\ndata: {"type": "ping"}\n\n')
    code = (
        "import sys\nfrom inspector.cli import main\n"
        f"rc = main(['dump', {str(sse)!r}])\n"
        "print('TEXTUAL' if any(m.startswith('textual') for m in sys.modules) else 'clean', rc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1].startswith("clean")
