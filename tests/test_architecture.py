"""The house's rules, checked at run time in fresh interpreters (import-linter checks the same layers statically).

- No module outside inspector/tui imports Textual: every module of every other package is imported, found by
  walking the package tree (a new module is checked without editing this list).
- `inspector --help`, `inspector scenarios` and `inspector dump FILE` import neither the SDK nor Textual.
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import inspector

ROOT = Path(inspector.__file__).parent


def engine_modules() -> list[str]:
    """Every module of the package outside inspector.tui and inspector.cli (the dashboard and the commands that
    open it) and outside the scenario workspaces (demo files, not code of ours)."""
    found = []
    for info in pkgutil.walk_packages([str(ROOT)], prefix="inspector."):
        name = info.name
        if name.startswith(("inspector.tui", "inspector.cli", "inspector.scenarios.workspace")):
            continue
        if name in ("inspector.__main__",):
            continue
        found.append(name)
    return sorted(found)


def test_the_walk_finds_every_layer() -> None:
    mods = engine_modules()
    for layer in ("core", "stream", "observe", "agent", "record", "scenarios", "net", "sessions", "state", "testing"):
        assert any(m.startswith(f"inspector.{layer}.") for m in mods), layer
    assert "inspector.stream.assembler" in mods and "inspector.net.proxy" in mods


def test_engine_modules_do_not_import_textual() -> None:
    mods = engine_modules()
    code = (
        "import importlib, sys\n"
        f"for m in {mods!r}: importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith(('textual.', 'inspector.tui')))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"engine imported: {out.stdout.strip()}"


def _imports_of(argv: list[str]) -> tuple[int, set[str]]:
    code = (
        "import sys\nfrom inspector.cli import main\n"
        f"rc = main({argv!r})\n"
        "heavy = {m.split('.')[0] for m in sys.modules} & {'anthropic', 'textual', 'httpx2', 'uvicorn', 'starlette'}\n"
        "print('MODULES', rc, ','.join(sorted(heavy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    line = [x for x in out.stdout.splitlines() if x.startswith("MODULES")][-1].split(" ")
    return int(line[1]), set(filter(None, (line[2] if len(line) > 2 else "").split(",")))


def test_help_scenarios_and_dump_import_neither_the_sdk_nor_textual(tmp_path: Path) -> None:
    sse = tmp_path / "s.sse"
    sse.write_bytes(b'event: ping\ndata: {"type": "ping"}\n\n')
    for argv in (["--help"], ["scenarios"], ["dump", str(sse)], ["dump", "--json", str(sse)]):
        rc, heavy = _imports_of(argv)
        assert rc in (0, 1), argv
        assert not heavy & {"anthropic", "textual", "httpx2"}, (argv, heavy)


def test_tests_mirror_the_packages_and_share_support_only_through_inspector_testing() -> None:
    """Each test folder is named after the package it tests; a test module imports no other test module (that works
    only because pytest puts test folders on sys.path): shared support is in ``inspector.testing``."""
    import ast

    tests = Path(__file__).resolve().parent
    packages = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    folders = {p.name for p in tests.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    assert folders <= packages, folders - packages
    test_modules = {p.stem for p in tests.rglob("*.py")}
    offenders = []
    for path in tests.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(tests)} imports {n}" for n in names if n.split(".")[0] in test_modules]
            if isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", None) == "sys":
                offenders.append(f"{path.relative_to(tests)} touches sys.path")
    assert not offenders, offenders
    assert not [p for p in tests.glob("*.py") if p.name not in ("test_architecture.py", "conftest.py")]
