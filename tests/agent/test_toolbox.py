"""Built-in tools (workspace confinement, caps, write guard) and the --tools loader."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol, cast

import pytest

from inspector.agent.executor import ToolExecutor, ToolState
from inspector.agent.toolbox import (
    ToolLoadError,
    ToolRefused,
    ToolSpec,
    builtin_tools,
    load_tools,
    resolve_in_root,
)
from inspector.agent.toolbox.builtin import READ_MAX_CHARS
from inspector.agent.toolbox.spec import _CURRENT_CANCEL

GUARD = 5.0


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "README.md").write_text("# Demo\nhello world\nsecond line\n")
    (root / "src" / "pkg" / "mod.py").write_text("def hello():\n    return 'Hello'\n\nTODO = 1\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("hello from git\n")
    (root / "blob.bin").write_bytes(b"\x00\x01hello\x00")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("hello secret\n")
    (root / "link_out").symlink_to(outside)
    (root / "secret_link.txt").symlink_to(outside / "secret.txt")
    (root / "link_in.md").symlink_to(root / "README.md")
    return root


class TextCall(Protocol):
    """A finished call of a tool that answers in text (every builtin tool, refusals and errors included)."""

    state: ToolState
    result: str
    is_error: bool
    traceback: str | None
    safe: bool


async def run(tools: dict[str, ToolSpec], name: str, inp: dict[str, Any]) -> TextCall:
    ex = ToolExecutor(tools)
    call = ex.submit("toolu_1", name, 0, inp)
    await asyncio.wait_for(ex.wait(), GUARD)
    await ex.aclose()
    assert isinstance(call.result, str), call.result
    return cast(TextCall, call)


# --------------------------------------------------------------------------------------------------- definitions
def test_builtin_definitions(ws: Path) -> None:
    tools = builtin_tools(ws)
    assert list(tools) == ["read_file", "list_dir", "search_text", "write_file", "sleep"]
    for t in tools.values():
        d = t.definition()
        assert set(d) == {"name", "description", "input_schema"}
        assert d["input_schema"]["type"] == "object" and len(d["description"]) > 40
        assert set(d["input_schema"].get("required", [])) <= set(d["input_schema"]["properties"])
    safe = {n: t.is_safe({}) for n, t in tools.items()}
    assert safe == {"read_file": True, "list_dir": True, "search_text": True, "write_file": False, "sleep": True}
    assert "disabled" in tools["write_file"].description
    assert "disabled" not in builtin_tools(ws, allow_write=True)["write_file"].description


# ---------------------------------------------------------------------------------------------------- read_file
async def test_read_file(ws: Path) -> None:
    c = await run(builtin_tools(ws), "read_file", {"path": "README.md"})
    assert (c.state, c.result, c.is_error) == (ToolState.SUCCEEDED, "# Demo\nhello world\nsecond line\n", False)


async def test_read_file_offset_limit(ws: Path) -> None:
    (ws / "many.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    c = await run(builtin_tools(ws), "read_file", {"path": "many.txt", "offset": 3, "limit": 2})
    assert c.result == "line 3\nline 4\n[lines 3-4 of 10; use offset=5 to read more]"
    c = await run(builtin_tools(ws), "read_file", {"path": "many.txt", "offset": 9})
    assert c.result == "line 9\nline 10\n"
    c = await run(builtin_tools(ws), "read_file", {"path": "many.txt", "offset": 50})
    assert "past the end" in c.result


async def test_read_file_char_cap(ws: Path) -> None:
    (ws / "big.txt").write_text("y" * (READ_MAX_CHARS + 10) + "\nnext\n")
    c = await run(builtin_tools(ws), "read_file", {"path": "big.txt"})
    assert c.state is ToolState.SUCCEEDED
    assert c.result.startswith("y" * READ_MAX_CHARS + "\n[truncated at 50000 chars")
    assert len(c.result) < READ_MAX_CHARS + 200


@pytest.mark.parametrize(
    ("inp", "message"),
    [
        ({"path": "missing.txt"}, "no such file: 'missing.txt'"),
        ({"path": "src"}, "'src' is a directory; use list_dir"),
        ({"path": "blob.bin"}, "'blob.bin' looks like a binary file; not shown"),
        ({}, "'path' must be a non-empty string, relative to the workspace root"),
        ({"path": "README.md", "limit": "x"}, "'limit' must be an integer, got 'x'"),
    ],
)
async def test_read_file_refusals(ws: Path, inp: dict[str, Any], message: str) -> None:
    c = await run(builtin_tools(ws), "read_file", inp)
    assert (c.state, c.result, c.is_error) == (ToolState.FAILED, message, True)


@pytest.mark.parametrize(
    ("tool", "message"),
    [
        ("read_file", "no such file: '{path}'"),
        ("list_dir", "no such directory: '{path}'"),
        ("search_text", "no such file or directory: '{path}'"),
    ],
)
@pytest.mark.parametrize("path", ["nodir/file.txt", "nodir/sub/..", "src/nodir/x", "src/nodir/../../x"])
async def test_a_path_below_a_missing_directory_is_missing(ws: Path, tool: str, message: str, path: str) -> None:
    # (walked lexically below the missing directory: once read as "a directory", listed and searched as the
    # deepest directory that exists, under the missing path's name)
    c = await run(builtin_tools(ws), tool, {"path": path, "pattern": "hello"})
    assert (c.state, c.result, c.is_error) == (ToolState.FAILED, message.format(path=path), True)


@pytest.mark.parametrize(
    "path", ["link_out/nodir/secret.txt", "src/nodir/../../link_out/new/x.txt", "nodir/../link_out/new/x.txt"]
)
@pytest.mark.parametrize("tool", ["read_file", "list_dir", "search_text", "write_file"])
async def test_a_missing_directory_on_the_way_does_not_open_a_symlink_out(
    ws: Path, tmp_path: Path, tool: str, path: str
) -> None:
    """A missing directory before or after a symlink out of the root: still outside (not 'no such...', never the
    host's entries), and a refused write makes no directory, inside or out."""

    def tree() -> list[Path]:
        return sorted(tmp_path.rglob("*"))

    before = tree()
    inp = {"path": path, "pattern": "hello", "content": "pwned"}
    c = await run(builtin_tools(ws, allow_write=True), tool, inp)
    assert (c.state, c.result, c.is_error) == (ToolState.FAILED, f"path '{path}' is outside the workspace root", True)
    assert tree() == before


# ---------------------------------------------------------------------------------------------- path confinement
ESCAPES = ["../outside/secret.txt", "src/../../outside/secret.txt", "link_out/secret.txt", "secret_link.txt"]


@pytest.mark.parametrize("path", ESCAPES + ["ABS"])
@pytest.mark.parametrize("tool", ["read_file", "list_dir", "search_text", "write_file"])
async def test_paths_cannot_leave_the_root(ws: Path, tmp_path: Path, tool: str, path: str) -> None:
    if path == "ABS":
        path = str(tmp_path / "outside" / "secret.txt")
    inp = {"path": path, "pattern": "hello", "content": "pwned"}
    c = await run(builtin_tools(ws, allow_write=True), tool, inp)
    assert (c.state, c.result, c.is_error) == (ToolState.FAILED, f"path '{path}' is outside the workspace root", True)
    assert (tmp_path / "outside" / "secret.txt").read_text() == "hello secret\n"


def test_resolve_in_root(ws: Path) -> None:
    assert resolve_in_root(ws, "src/../README.md") == (ws / "README.md").resolve()  # `..` staying inside is fine
    assert resolve_in_root(ws, "link_in.md") == (ws / "README.md").resolve()  # symlink inside the root is fine
    assert resolve_in_root(ws, ".") == ws.resolve()
    for bad in ["/etc/passwd", "..", "../ws2", "link_out"]:
        with pytest.raises(ToolRefused, match="outside the workspace root"):
            resolve_in_root(ws, bad)
    with pytest.raises(ToolRefused):
        resolve_in_root(ws, "a\x00b")


# ------------------------------------------------------------------------------------------------------ list_dir
async def test_list_dir(ws: Path) -> None:
    c = await run(builtin_tools(ws), "list_dir", {})
    lines = c.result.splitlines()
    assert lines[0] == ".: 7 entries"
    assert (
        "src/" in lines and "link_out@" in lines and f"README.md  ({(ws / 'README.md').stat().st_size} bytes)" in lines
    )
    c = await run(builtin_tools(ws), "list_dir", {"path": "src/pkg"})
    assert c.result == f"src/pkg: 1 entries\nmod.py  ({(ws / 'src/pkg/mod.py').stat().st_size} bytes)"
    c = await run(builtin_tools(ws), "list_dir", {"path": "README.md"})
    assert c.state is ToolState.FAILED and "not a directory" in c.result


# --------------------------------------------------------------------------------------------------- search_text
async def test_search_text_regex(ws: Path) -> None:
    c = await run(builtin_tools(ws), "search_text", {"pattern": r"hel+o"})
    assert c.state is ToolState.SUCCEEDED
    lines = c.result.splitlines()
    assert "README.md:2: hello world" in lines
    assert "link_in.md:2: hello world" in lines
    assert not any(line.startswith((".git", "blob.bin", "link_out", "secret_link")) for line in lines)
    assert "secret" not in c.result


async def test_search_text_options(ws: Path) -> None:
    tools = builtin_tools(ws)
    c = await run(tools, "search_text", {"pattern": "HELLO", "path": "src", "ignore_case": True})
    assert c.result == "src/pkg/mod.py:1: def hello():\nsrc/pkg/mod.py:2:     return 'Hello'"
    c = await run(tools, "search_text", {"pattern": "hello(", "path": "src"})  # invalid regex: plain text
    assert c.result.startswith("[not a valid regex") and "src/pkg/mod.py:1: def hello():" in c.result
    c = await run(tools, "search_text", {"pattern": "e", "max_results": 2})
    assert c.result.count("\n") == 2 and c.result.endswith("[stopped at 2 matches; narrow the pattern or path]")
    c = await run(tools, "search_text", {"pattern": "zzz_nothing"})
    assert c.result.startswith("no matches for 'zzz_nothing'")
    c = await run(tools, "search_text", {"pattern": "."})
    assert c.result.count("\n") < 50


def test_search_text_checks_cancel_event(ws: Path) -> None:
    import threading

    ev = threading.Event()
    ev.set()
    token = _CURRENT_CANCEL.set(ev)
    try:
        assert builtin_tools(ws)["search_text"].fn({"pattern": "hello"}) == "[search cancelled]"
    finally:
        _CURRENT_CANCEL.reset(token)


# ---------------------------------------------------------------------------------------------------- write_file
async def test_write_file_disabled_by_default(ws: Path) -> None:
    c = await run(builtin_tools(ws), "write_file", {"path": "new.txt", "content": "hi"})
    assert (c.state, c.result, c.is_error) == (
        ToolState.FAILED,
        "write_file is disabled: start with --allow-write",
        True,
    )
    assert c.traceback is None
    assert not (ws / "new.txt").exists()


async def test_write_file_enabled(ws: Path) -> None:
    c = await run(builtin_tools(ws, allow_write=True), "write_file", {"path": "out/new.txt", "content": "héllo"})
    assert (c.state, c.result) == (ToolState.SUCCEEDED, "wrote 6 bytes to out/new.txt")
    assert (ws / "out" / "new.txt").read_text(encoding="utf-8") == "héllo"
    assert c.safe is False


# --------------------------------------------------------------------------------------------------------- sleep
async def test_sleep_is_cancellable() -> None:
    tools = builtin_tools(Path("."))
    before = asyncio.all_tasks()
    ex = ToolExecutor(tools)
    a = ex.submit("t1", "sleep", 0, {"seconds": 600})
    b = ex.submit("t2", "sleep", 1, {"seconds": 600})
    assert a.state is b.state is ToolState.RUNNING  # safe: both run
    await asyncio.wait_for(ex.cancel(), GUARD)
    assert [a.state, b.state] == [ToolState.CANCELLED] * 2  # (a list: mypy keeps the states narrowed above)
    assert asyncio.all_tasks() == before


async def test_sleep_zero_and_bad_input() -> None:
    tools = builtin_tools(Path("."))
    c = await run(tools, "sleep", {"seconds": 0})
    assert c.result == "slept 0 s"
    c = await run(tools, "sleep", {"seconds": -1})
    assert c.state is ToolState.FAILED and c.result == "'seconds' must be a number >= 0, got -1"


# -------------------------------------------------------------------------------------------------------- loader
@pytest.fixture
def pkgdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """A fresh importable directory on sys.path, and a unique module name."""
    d = tmp_path / "userpkgs"
    d.mkdir()
    monkeypatch.syspath_prepend(str(d))
    name = f"usertools_{uuid.uuid4().hex[:8]}"
    yield d, name
    for m in [m for m in sys.modules if m.startswith(name)]:
        del sys.modules[m]


def write_module(d: Path, name: str, body: str) -> Path:
    p = d / f"{name}.py"
    p.write_text(textwrap.dedent(body))
    return p


MODULE = """
    from inspector.agent.toolbox import ToolSpec

    def echo(inp):
        return inp

    async def aecho(inp):
        return inp

    ONE = ToolSpec("echo", "Echo the input.", {"type": "object"}, echo, concurrency_safe=True)
    LIST = [ONE, ToolSpec("aecho", "Async echo.", {"type": "object"}, aecho)]
    MAPPING = {"echo": ONE}
    DICT_TOOL = {"name": "plain", "description": "A plain dict tool.", "input_schema": {"type": "object"},
                 "function": echo, "concurrency_safe": True, "timeout": 3}
    DICTS = [DICT_TOOL, {"name": "nodesc", "input_schema": {"type": "object"}, "function": aecho}]

    def make():
        return LIST

    class NS:
        tools = [ONE]

    NUMBER = 42
    EMPTY = []
    DUP = [ONE, ONE]
    BADNAME = [{"name": "has space", "input_schema": {}, "function": echo}]
    NEWLINE_NAME = [{"name": "echo\\n", "input_schema": {}, "function": echo}]
    MISSING_FN = [{"name": "x", "input_schema": {}}]
    UNKNOWN_KEY = [{"name": "x", "input_schema": {}, "function": echo, "concurency_safe": True}]
    BAD_TIMEOUT = {"name": "x", "input_schema": {}, "function": echo, "timeout": -1}

    def broken():
        raise RuntimeError("cannot build")
"""


def test_load_module_forms(pkgdir: tuple[Path, str]) -> None:
    d, name = pkgdir
    write_module(d, name, MODULE)
    assert list(load_tools(f"{name}:ONE")) == ["echo"]
    assert list(load_tools(f"{name}:LIST")) == ["echo", "aecho"]
    assert list(load_tools(f"{name}:MAPPING")) == ["echo"]
    assert list(load_tools(f"{name}:make")) == ["echo", "aecho"]
    assert list(load_tools(f"{name}:NS.tools")) == ["echo"]
    plain = load_tools(f"{name}:DICT_TOOL")["plain"]
    assert isinstance(plain, ToolSpec) and plain.timeout == 3 and plain.is_safe({}) and plain.fn({"a": 1}) == {"a": 1}
    dicts = load_tools(f"{name}:DICTS")
    assert dicts["nodesc"].description == "" and dicts["nodesc"].is_safe({}) is False


async def test_loaded_tools_run_in_the_executor(pkgdir: tuple[Path, str]) -> None:
    d, name = pkgdir
    write_module(d, name, MODULE)
    ex = ToolExecutor(load_tools(f"{name}:LIST"))
    a = ex.submit("t1", "echo", 0, {"x": 1})
    b = ex.submit("t2", "aecho", 1, {"y": 2})
    await asyncio.wait_for(ex.wait(), GUARD)
    await ex.aclose()
    assert (a.result, b.result) == ('{"x":1}', '{"y":2}')


def test_load_from_file_path(tmp_path: Path) -> None:
    p = write_module(tmp_path, "my_tools", MODULE)
    assert list(load_tools(f"{p}:LIST")) == ["echo", "aecho"]
    rel = os.path.relpath(p)
    assert list(load_tools(f"{rel}:ONE")) == ["echo"]


def test_load_package_module(pkgdir: tuple[Path, str]) -> None:
    d, name = pkgdir
    (d / name).mkdir()
    (d / name / "__init__.py").write_text("")
    write_module(d / name, "tools", MODULE)
    assert list(load_tools(f"{name}.tools:ONE")) == ["echo"]


@pytest.mark.parametrize(
    ("attr", "message"),
    [
        ("NOPE", "has no attribute 'NOPE'"),
        ("NS.nope", "has no attribute 'NS.nope'"),
        ("NUMBER", "expected a ToolSpec, a tool dict, a list/dict of them or a callable returning them; got int"),
        ("EMPTY", "defines no tools"),
        ("DUP", "duplicate tool name 'echo'"),
        ("BADNAME", "invalid tool name 'has space'"),
        ("NEWLINE_NAME", "invalid tool name 'echo\\n'"),  # (`$` matches before a trailing newline)
        ("MISSING_FN", "'function' must be a callable"),
        ("UNKNOWN_KEY", "unknown keys ['concurency_safe']"),
        ("BAD_TIMEOUT", "'timeout' must be a positive number"),
        ("broken", "calling broken() failed: RuntimeError: cannot build"),
    ],
)
def test_load_errors_in_module(pkgdir: tuple[Path, str], attr: str, message: str) -> None:
    d, name = pkgdir
    write_module(d, name, MODULE)
    with pytest.raises(ToolLoadError) as e:
        load_tools(f"{name}:{attr}")
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_load_errors_import(pkgdir: tuple[Path, str], tmp_path: Path) -> None:
    d, name = pkgdir
    with pytest.raises(ToolLoadError, match=r"^module 'no_such_module_xyz' not found"):
        load_tools("no_such_module_xyz:TOOLS")
    with pytest.raises(ToolLoadError, match=r"^module 'no_such_module_xyz\.sub' not found"):
        load_tools("no_such_module_xyz.sub:TOOLS")
    write_module(d, name, "import missing_dependency_xyz\n")
    with pytest.raises(ToolLoadError, match="error importing .*No module named 'missing_dependency_xyz'"):
        load_tools(f"{name}:TOOLS")
    bad = write_module(tmp_path, "bad_tools", "raise ValueError('at import')\n")
    with pytest.raises(ToolLoadError, match=r"error importing .*bad_tools.py: ValueError: at import"):
        load_tools(f"{bad}:TOOLS")
    with pytest.raises(ToolLoadError, match="tool file not found"):
        load_tools(f"{tmp_path}/nope.py:TOOLS")
    for spec in ["just_a_module", "mod:", ":attr"]:
        with pytest.raises(ToolLoadError, match="expects 'package.module:attr'"):
            load_tools(spec)


# ------------------------------------------------------------------------------- special files, loops, regex engine
SPECIAL_MESSAGE = "'{path}' is a FIFO (named pipe): refused, not opened"


@pytest.mark.parametrize("tool", ["read_file", "list_dir", "search_text", "write_file"])
async def test_fifo_is_refused_not_opened(ws: Path, tool: str) -> None:
    os.mkfifo(ws / "pipe")
    inp = {"path": "pipe", "pattern": "x", "content": "data"}
    c = await run(builtin_tools(ws, allow_write=True), tool, inp)  # would block its thread forever if opened
    assert (c.state, c.result, c.is_error) == (ToolState.FAILED, SPECIAL_MESSAGE.format(path="pipe"), True)


async def test_fifo_behind_a_symlink_is_refused(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    (ws / "pipe_link").symlink_to(ws / "pipe")
    c = await run(builtin_tools(ws), "read_file", {"path": "pipe_link"})
    assert (c.state, c.result) == (ToolState.FAILED, SPECIAL_MESSAGE.format(path="pipe_link"))


def test_open_entry_refuses_a_fifo_swapped_in_after_the_check(ws: Path) -> None:
    """The descriptor is checked (fstat against the lstat that chose it), not only the path before: a FIFO swapped in
    never blocks the open and is never read."""
    from inspector.agent.toolbox.confine import Changed, open_entry

    (ws / "pipe").write_text("a file, at lstat time")
    st = os.lstat(ws / "pipe")
    (ws / "pipe").rename(ws / "kept")  # (kept: its inode number is not reused by the FIFO)
    os.mkfifo(ws / "pipe")
    dfd = os.open(ws, os.O_RDONLY)
    try:
        with pytest.raises(Changed):
            open_entry(dfd, "pipe", st)
        with pytest.raises(Changed):  # (no reader: ENXIO, still never blocking)
            open_entry(dfd, "pipe", st, os.O_WRONLY)
    finally:
        os.close(dfd)


async def test_search_and_list_skip_special_files_in_a_directory(ws: Path) -> None:
    os.mkfifo(ws / "src" / "pipe")
    c = await run(builtin_tools(ws), "search_text", {"pattern": "hello", "path": "src"})
    assert (c.state, c.result) == (ToolState.SUCCEEDED, "src/pkg/mod.py:1: def hello():")
    c = await run(builtin_tools(ws), "list_dir", {"path": "src"})
    assert c.result.splitlines() == ["src: 2 entries", "pipe  (a FIFO (named pipe))", "pkg/"]


async def test_search_text_skips_symlink_loops_with_a_note(ws: Path, tmp_path: Path) -> None:
    (ws / "src" / "loop_a").symlink_to(ws / "src" / "loop_b")
    (ws / "src" / "loop_b").symlink_to(ws / "src" / "loop_a")
    (ws / "self").symlink_to(ws / "self")
    (ws / "src" / "up").symlink_to(ws)  # a directory loop: never descended
    c = await run(builtin_tools(ws), "search_text", {"pattern": "hello"})
    assert c.state is ToolState.SUCCEEDED, c.result
    first, *rest = c.result.splitlines()
    assert first == "[skipped: self (symlink loop), src/loop_a (symlink loop), src/loop_b (symlink loop)]"
    assert "README.md:2: hello world" in rest and "src/pkg/mod.py:1: def hello():" in rest
    assert str(tmp_path) not in c.result  # no host path reaches the model


async def test_read_file_through_a_symlink_loop_is_refused(ws: Path) -> None:
    (ws / "self").symlink_to(ws / "self")
    c = await run(builtin_tools(ws), "read_file", {"path": "self"})
    assert (c.state, c.result) == (ToolState.FAILED, "path 'self' is not a valid path")


@pytest.mark.parametrize("pattern", [r"(hello)\s+\1", r"hel(?=lo)", r"(?<!x)hello", r"(?P<w>l)(?P=w)"])
async def test_search_text_never_falls_back_to_python_re(ws: Path, pattern: str) -> None:
    """Backreferences and lookaround: RE2 cannot compile them; the search is literal and the result says so."""
    (ws / "odd.txt").write_text(f"x {pattern} y\n")
    c = await run(builtin_tools(ws), "search_text", {"pattern": pattern})
    assert c.state is ToolState.SUCCEEDED
    note, *hits = c.result.splitlines()
    assert note.startswith("[not a valid regex for RE2 (") and "searched as plain text" in note
    assert hits == [f"odd.txt:1: x {pattern} y"]


async def test_search_text_is_linear_on_a_catastrophic_pattern(ws: Path) -> None:
    (ws / "evil.txt").write_text("a" * 5000 + "b\n" + "a" * 40 + "\n")
    c = await run(builtin_tools(ws), "search_text", {"pattern": "(a+)+$", "path": "evil.txt"})
    assert (c.state, c.result) == (ToolState.SUCCEEDED, "evil.txt:2: " + "a" * 40)


async def test_search_text_literal_and_case(ws: Path) -> None:
    c = await run(builtin_tools(ws), "search_text", {"pattern": "HEL+O", "literal": True, "ignore_case": True})
    assert c.result.startswith("no matches")
    c = await run(builtin_tools(ws), "search_text", {"pattern": "'HELLO'", "literal": True, "ignore_case": True})
    assert c.result == "src/pkg/mod.py:2:     return 'Hello'"


@pytest.mark.parametrize("tool", ["read_file", "list_dir", "search_text", "write_file"])
async def test_socket_is_refused_not_opened(tmp_path: Path, tool: str) -> None:
    import socket

    root = tmp_path / "w"  # (a short path: AF_UNIX paths are limited to ~100 bytes)
    root.mkdir()
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(root / "sock"))
        c = await run(builtin_tools(root, allow_write=True), tool, {"path": "sock", "pattern": "x", "content": "d"})
    finally:
        s.close()
    assert (c.state, c.result) == (ToolState.FAILED, "'sock' is a socket: refused, not opened")


def _workspace_with_a_name_not_utf8(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    with open(os.path.join(os.fsencode(root), b"\xff\xfebad.txt"), "wb") as f:
        f.write(b"hello\n")
    return root


async def test_a_file_name_that_is_not_utf8_never_makes_a_result_the_sdk_cannot_send(tmp_path: Path) -> None:
    """os gives such a name with surrogates ('\\udcff'); in a tool result they made the SDK's JSON encoder (and the
    transcript's) raise UnicodeEncodeError, and the whole run ended in 'internal error'. Any tool's text, a
    refusal's and an exception's message alike, comes out with U+FFFD in their place."""
    from inspector.agent.transcript import sdk_json

    tools = builtin_tools(_workspace_with_a_name_not_utf8(tmp_path))

    def refuses(inp: dict[str, Any]) -> str:
        raise ToolRefused("no such file: '\udcff'")

    def raises(inp: dict[str, Any]) -> str:
        raise OSError("cannot open '\udcff'")

    tools["refuses"] = ToolSpec("refuses", "d", {"type": "object"}, refuses)
    tools["raises"] = ToolSpec("raises", "d", {"type": "object"}, raises)
    expected = {
        "list_dir": ".: 1 entries\n\ufffd\ufffdbad.txt  (6 bytes)",
        "search_text": "\ufffd\ufffdbad.txt:1: hello",
        "refuses": "no such file: '\ufffd'",
        "raises": "ToolError: OSError: cannot open '\ufffd'",
    }
    for name, text in expected.items():
        c = await run(tools, name, {"pattern": "hello"})
        assert c.result == text
        sdk_json({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": c.result}]})


def _workspace_with_names_that_forge_lines(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "d\nx").mkdir(parents=True)
    (root / "d\nx" / "evil  (9 bytes)\nREADME.md").write_text("hello\n")
    (root / '"q.txt"').write_text("hello\n")
    return root


async def test_a_name_with_a_newline_is_one_quoted_entry_not_two(tmp_path: Path) -> None:
    """'evil  (9 bytes)\\nREADME.md' was listed as two lines: a file 'README.md' that is not there. A name with a
    control character (or a leading quote) is shown JSON-quoted, as the model sends it back."""
    tools = builtin_tools(_workspace_with_names_that_forge_lines(tmp_path))
    c = await run(tools, "list_dir", {"path": "d\nx"})
    assert c.result == '"d\\nx": 1 entries\n"evil  (9 bytes)\\nREADME.md"  (6 bytes)'
    c = await run(tools, "list_dir", {})
    assert c.result == '.: 2 entries\n"\\"q.txt\\""  (6 bytes)\n"d\\nx"/'
    c = await run(tools, "search_text", {"pattern": "hello"})
    assert c.result == '"\\"q.txt\\"":1: hello\n"d\\nx/evil  (9 bytes)\\nREADME.md":1: hello'
    c = await run(tools, "read_file", {"path": "d\nx/evil  (9 bytes)\nREADME.md"})  # (the name the model decodes)
    assert c.result == "hello\n"
