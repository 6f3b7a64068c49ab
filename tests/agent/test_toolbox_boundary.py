"""The workspace is a boundary (issue 19): symlink races, hard links, absurd depth, huge lines. Every builtin tool
that touches the workspace walks paths from the root's descriptor with no-follow semantics (toolbox/confine.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inspector.agent.executor import ToolExecutor, ToolState
from inspector.agent.toolbox import ToolRefused, builtin_tools
from inspector.agent.toolbox.builtin import READ_MAX_CHARS
from inspector.agent.toolbox.spec import ToolFn
from inspector.testing.hyp import examples

SECRET = "HOST SECRET\n"


def _rmtree(top: Path) -> None:
    """Remove a tree of any depth, without recursion (shutil.rmtree and os.walk recurse: a 2,000-level tree
    overflows them), one directory descriptor open at a time and every step relative to it: a path from the top
    makes each step cost the depth (a 2,000-level tree took 2-3 s to remove)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    fd = os.open(top, flags)
    names: list[str] = []  # the way down from top: fd is the directory top/names[0]/names[1]/...
    try:
        while True:
            sub = None
            with os.scandir(fd) as it:
                for e in it:
                    if e.is_dir(follow_symlinks=False):
                        sub = e.name
                        break
                    os.unlink(e.name, dir_fd=fd)
            if sub is not None:  # down into it
                down = os.open(sub, flags, dir_fd=fd)
                os.close(fd)
                fd = down
                names.append(sub)
            elif names:  # empty: up, and remove it
                up = os.open("..", flags, dir_fd=fd)
                os.close(fd)
                fd = up
                os.rmdir(names.pop(), dir_fd=fd)
            else:
                break
    finally:
        os.close(fd)
    os.rmdir(top)


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """A scratch directory on tmpfs when there is one (ext4 flushes a file truncated or renamed over at close: 5 ms a
    write, which would make 10,000 writes take a minute), else under tmp_path."""
    import tempfile

    shm = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(dir=shm)) if shm.is_dir() and os.access(shm, os.W_OK) else tmp_path / "scratch"
    base.mkdir(exist_ok=True)
    yield base
    _rmtree(base) if base.exists() else None


@pytest.fixture
def box(scratch: Path) -> tuple[Path, Path]:
    """A workspace whose `real_dir` is a directory holding `passwd` (inside content), and a host directory whose
    `passwd` is the secret."""
    ws = scratch / "ws"
    (ws / "real_dir").mkdir(parents=True)
    (ws / "real_dir" / "passwd").write_text("inside\n")
    host = scratch / "host"
    host.mkdir()
    (host / "passwd").write_text(SECRET)
    return ws, host


RACER = r"""
import ctypes, os, sys
mode, ws, host = sys.argv[1:4]
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
if mode == "flip":  # real_dir: a real directory, then a symlink to the host directory, and again (never missing)
    a, b = os.path.join(ws, "real_dir").encode(), os.path.join(ws, "real_dir.evil").encode()
else:  # relink, swap: ws/hard.txt: the workspace's own file, then a hard link to the host file, and again
    a, b = os.path.join(ws, "hard.txt").encode(), os.path.join(ws, "hard.evil").encode()
print("ready", flush=True)
while True:
    if mode in ("flip", "swap"):
        libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
    elif os.stat(a).st_nlink == 1:  # write_file replaced the link: link it again, atomically
        os.link(os.path.join(host, "passwd"), b)
        os.rename(b, a)
"""


class Racer:
    """A separate process (no GIL between it and the tools) that swaps two workspace entries atomically
    (renameat2 RENAME_EXCHANGE), as fast as it can, until stopped."""

    def __init__(self, mode: str, ws: Path, host: Path) -> None:
        import subprocess
        import sys

        if mode == "flip":
            (ws / "real_dir.evil").symlink_to(host)
        if mode == "swap":  # (RENAME_EXCHANGE of the workspace's own hard.txt and a hard link to the host file)
            (ws / "hard.txt").write_text("inside\n")
            os.link(host / "passwd", ws / "hard.evil")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", RACER, mode, str(ws), str(host)], stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "ready\n"

    def __enter__(self) -> Racer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def _call(fn: ToolFn, inp: dict[str, Any]) -> str:
    try:
        out = fn(inp)
        assert isinstance(out, str), out
        return out
    except ToolRefused as e:
        return f"refused: {e}"


@pytest.mark.parametrize(
    ("tool", "inp", "n", "inside"),
    [
        ("read_file", {"path": "real_dir/passwd"}, 10_000, "inside\n"),
        ("read_file", {"path": "real_dir/../real_dir/passwd"}, 2_000, "inside\n"),
        ("list_dir", {"path": "real_dir"}, 2_000, "real_dir: 1 entries\npasswd  (7 bytes)"),
        ("search_text", {"pattern": "S.CRET|inside", "path": "real_dir"}, 2_000, "real_dir/passwd:1: inside"),
    ],
)
def test_a_flipping_directory_symlink_never_lets_a_tool_out(
    box: tuple[Path, Path], tool: str, inp: dict[str, Any], n: int, inside: str
) -> None:
    ws, host = box
    fn = builtin_tools(ws)[tool].fn
    seen: dict[str, int] = {}
    outside = "' is outside the workspace root"
    with Racer("flip", ws, host):
        for i in range(5 * n):  # n calls, and more until both sides of the race were met (a loaded machine)
            out = _call(fn, inp)
            assert "SECRET" not in out, out
            seen[out] = seen.get(out, 0) + 1
            if i >= n and seen.get(inside) and any(o.endswith(outside) for o in seen):
                break
    assert (host / "passwd").read_text() == SECRET
    # the race really ran: the tool met the directory and the symlink to the host, and told which
    assert seen.get(inside) and any(o.endswith(outside) for o in seen), seen


def test_search_of_the_whole_tree_with_a_flipping_symlink_never_shows_the_host(box: tuple[Path, Path]) -> None:
    ws, host = box
    fn = builtin_tools(ws)["search_text"].fn
    with Racer("flip", ws, host):
        outs: set[str] = set()
        for i in range(10_000):  # 2,000 calls, and more until both names were met (a loaded machine)
            outs.add(_call(fn, {"pattern": "S.CRET|inside"}))
            if i >= 2_000 and {"real_dir/passwd:1: inside", "real_dir.evil/passwd:1: inside"} <= outs:
                break
    assert not [o for o in outs if "SECRET" in o]
    assert "real_dir/passwd:1: inside" in outs and "real_dir.evil/passwd:1: inside" in outs  # (the race ran)


def test_write_file_through_a_flipping_directory_symlink_stays_inside(box: tuple[Path, Path]) -> None:
    ws, host = box
    fn = builtin_tools(ws, allow_write=True)["write_file"].fn
    with Racer("flip", ws, host):
        refused = wrote = False
        for i in range(15_000):  # 3,000 calls, and more until both sides of the race were met (a loaded machine)
            out = _call(fn, {"path": "real_dir/passwd", "content": f"pwned {i}\n"})
            refused |= out == "refused: path 'real_dir/passwd' is outside the workspace root"
            wrote |= out.startswith("wrote")
            if i >= 3_000 and refused and wrote:
                break
    assert (host / "passwd").read_text() == SECRET
    assert sorted(p.name for p in host.iterdir()) == ["passwd"]
    assert refused and wrote  # (the race ran)


def test_write_file_never_writes_through_a_hard_link(box: tuple[Path, Path]) -> None:
    """A hard link in the workspace to a host file: the write replaces the link (a new file renamed over it), the host
    file keeps its content. Another process re-links the target during 10,000 writes."""
    ws, host = box
    outside = host / "passwd"
    os.link(outside, ws / "hard.txt")
    fn = builtin_tools(ws, allow_write=True)["write_file"].fn
    assert fn({"path": "hard.txt", "content": "new\n"}) == (
        "wrote 4 bytes to hard.txt (it was a hard link: replaced by a new file; its other links keep the old content)"
    )
    assert (ws / "hard.txt").read_text() == "new\n" and outside.read_text() == SECRET
    assert os.stat(outside).st_nlink == 1
    relinked = 0
    with Racer("relink", ws, host):
        for i in range(50_000):  # 10,000 writes, and more until the relinking raced 100 of them (a loaded machine)
            relinked += os.stat(ws / "hard.txt").st_nlink > 1
            assert _call(fn, {"path": "hard.txt", "content": f"w{i}\n"}).startswith("wrote")
            if i >= 10_000 and relinked > 100:
                break
    assert outside.read_text() == SECRET
    assert relinked > 100, "the race did not run"
    assert not [p for p in ws.iterdir() if p.name.endswith(".inspector-write.tmp")]  # no temp file left behind


HARD = "is a hard link (2 names: another may be outside the workspace): refused, not read"


def test_reads_refuse_a_hard_link_out_of_the_workspace(box: tuple[Path, Path]) -> None:
    """A hard link in the workspace to a host file is the host file: read_file returned the secret and search_text
    showed its lines, where a symlink to it is refused. A file with more than one name is refused by name, one line
    (the same through a symlink inside), and a tree's search skips it with a note; a workspace whose links are known
    (hard_links=True: a bundled one) reads it."""
    ws, host = box
    os.link(host / "passwd", ws / "hard.txt")
    (ws / "via").symlink_to("hard.txt")
    tools = builtin_tools(ws)
    for path in ("hard.txt", "via"):
        assert _call(tools["read_file"].fn, {"path": path}) == f"refused: '{path}' {HARD}"
    assert _call(tools["search_text"].fn, {"pattern": "S.CRET", "path": "hard.txt"}) == f"refused: 'hard.txt' {HARD}"
    assert _call(tools["search_text"].fn, {"pattern": "S.CRET|inside"}) == (
        "[skipped: hard.txt (a hard link), via (a hard link)]\nreal_dir/passwd:1: inside"
    )
    trusted = builtin_tools(ws, hard_links=True)
    assert trusted["read_file"].fn({"path": "hard.txt"}) == SECRET
    # nor does list_dir tell its size (the host file's): one name of it, not read
    listed = _call(tools["list_dir"].fn, {}).splitlines()
    assert "hard.txt  (a hard link: not read)" in listed
    assert f"hard.txt  ({len(SECRET)} bytes)" in _call(trusted["list_dir"].fn, {}).splitlines()


def test_a_scenario_s_own_folder_is_not_trusted_with_hard_links_a_bundled_one_is(box: tuple[Path, Path]) -> None:
    from inspector.scenarios.bundled import get_scenario

    ws, host = box
    os.link(host / "passwd", ws / "hard.txt")
    bundled = dataclasses.replace(get_scenario("parse_date"), tool_durations={})  # (its tools then answer at once)
    mine = dataclasses.replace(bundled, workspace=str(ws), workspace_copy=False)
    assert _call(mine.resolve_tools(ws)["read_file"].fn, {"path": "hard.txt"}) == f"refused: 'hard.txt' {HARD}"
    assert bundled.resolve_tools(ws)["read_file"].fn({"path": "hard.txt"}) == SECRET  # (this root, its trust)


def test_read_file_never_reads_a_hard_link_swapped_in(box: tuple[Path, Path]) -> None:
    """Another process swaps the workspace's own hard.txt and a hard link to the host file (RENAME_EXCHANGE) as fast
    as it can: each read gets the inside content or the refusal, never the host's."""
    ws, host = box
    fn = builtin_tools(ws)["read_file"].fn
    seen: dict[str, int] = {}
    with Racer("swap", ws, host):
        for i in range(25_000):  # 5,000 reads, and more until both sides of the race were met (a loaded machine)
            out = _call(fn, {"path": "hard.txt"})
            assert "SECRET" not in out, out
            seen[out] = seen.get(out, 0) + 1
            if i >= 5_000 and len(seen) >= 2:
                break
    assert seen.get("inside\n") and seen.get(f"refused: 'hard.txt' {HARD}"), seen  # (the race ran)
    assert set(seen) <= {
        "inside\n",
        f"refused: 'hard.txt' {HARD}",
        "refused: 'hard.txt' kept changing while it was opened; refused",
    }


def test_write_file_keeps_the_mode_of_the_file_it_replaces(box: tuple[Path, Path]) -> None:
    ws, _ = box
    (ws / "run.sh").write_text("old")
    os.chmod(ws / "run.sh", 0o751)
    builtin_tools(ws, allow_write=True)["write_file"].fn({"path": "run.sh", "content": "new"})
    assert (ws / "run.sh").read_text() == "new" and (os.stat(ws / "run.sh").st_mode & 0o777) == 0o751


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("new/dirs/../../../x.txt", "is outside the workspace root"),
        ("d/" * 300 + "f.txt", "is too deep: more than 256 directory levels"),
        ("d/" * 257 + "f.txt", "is too deep: more than 256 directory levels"),
    ],
    ids=["outside", "300-levels", "257-levels"],
)
def test_a_refused_write_makes_no_directory(tmp_path: Path, path: str, why: str) -> None:
    # (the directories on the way were made before the refusal: 'new/dirs', and 256 levels of 'd', were left)
    ws = tmp_path / "ws"
    ws.mkdir()
    with pytest.raises(ToolRefused, match=why):
        builtin_tools(ws, allow_write=True)["write_file"].fn({"path": path, "content": "x"})
    assert list(ws.iterdir()) == []
    assert builtin_tools(ws, allow_write=True)["write_file"].fn({"path": "d/" * 256 + "f.txt", "content": "x"})


def _deep(ws: Path, levels: int) -> str:
    fd = os.open(ws, os.O_RDONLY)
    try:
        for _ in range(levels):
            os.mkdir("a", dir_fd=fd)
            nfd = os.open("a", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        with open(os.open("f.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as f:
            f.write("deep hello\n")
    finally:
        os.close(fd)
    return "a/" * levels + "f.txt"


@pytest.mark.parametrize("tool", ["read_file", "list_dir", "search_text", "write_file"])
def test_a_2000_level_path_is_a_clear_refusal_not_a_recursion_error(box: tuple[Path, Path], tool: str) -> None:
    ws, _ = box
    path = _deep(ws, 2000)
    with pytest.raises(ToolRefused, match=r"is too (deep|long): ") as e:
        builtin_tools(ws, allow_write=True)[tool].fn({"path": path, "pattern": "hello", "content": "x"})
    assert len(str(e.value)) < 300  # the path is not echoed whole


def test_search_text_skips_a_2000_level_tree_with_a_note(box: tuple[Path, Path]) -> None:
    ws, _ = box
    _deep(ws, 2000)
    out = builtin_tools(ws)["search_text"].fn({"pattern": "hello|inside"})
    assert isinstance(out, str)
    assert "real_dir/passwd:1: inside" in out
    assert "deeper than 64 levels" in out and "Recursion" not in out


def test_read_file_of_a_huge_single_line_holds_only_what_it_returns(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    size = 20_000_000
    with open(ws / "one_line.txt", "wb") as f:
        for _ in range(size // 1_000_000):
            f.write(b"z" * 1_000_000)
    fn = builtin_tools(ws)["read_file"].fn
    tracemalloc.start()
    try:
        out = fn({"path": "one_line.txt"})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(out, str)
    assert out.startswith("z" * READ_MAX_CHARS + "\n[truncated at 50000 chars in line 1")
    assert peak < 2_000_000, f"peak {peak} bytes for a {size}-byte line"


async def test_read_file_of_the_first_lines_of_a_huge_file_does_not_read_it_to_the_end(tmp_path: Path) -> None:
    """Counting the lines for the note stops READ_COUNT_MAX_CHARS past the lines asked for: the first line of a
    64 GiB file (sparse: no disk used) comes back at once; it once read on to the end, and met the tool's timeout
    (at ~14 s a GiB here, a 3 GB log's first line was 'timed out after 30 s'). A file that grows while read too."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "huge.log").write_bytes(b"".join(b"line %d\n" % i for i in range(2000)))
    os.truncate(ws / "huge.log", 64 * 2**30)
    spec = dataclasses.replace(builtin_tools(ws)["read_file"], timeout=5)
    ex = ToolExecutor({"read_file": spec})
    call = ex.submit("toolu_1", "read_file", 0, {"path": "huge.log", "limit": 1})
    await asyncio.wait_for(ex.wait(), 30)
    await ex.aclose()
    assert (call.state, call.result) == (
        ToolState.SUCCEEDED,
        "line 0\n[lines 1-1 of at least 2001; use offset=2 to read more]",
    )


@pytest.mark.parametrize(
    ("text", "inp", "expected"),
    [
        ("a\r\nb\rc\nd", {"offset": 2, "limit": 2}, "b\rc\n[lines 2-3 of 4; use offset=4 to read more]"),
        ("a\r", {}, "a\r"),
        ("a\n\n\n", {"offset": 3}, "\n"),
        ("a\nb", {"offset": 3}, "[file has 2 lines; offset 3 is past the end]"),
        ("", {}, ""),
    ],
)
def test_read_file_lines_are_universal_newlines_kept_untranslated(
    tmp_path: Path, text: str, inp: dict[str, Any], expected: str
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "t.txt").write_bytes(text.encode())
    assert builtin_tools(ws)["read_file"].fn({"path": "t.txt", **inp}) == expected


def test_read_file_pieces_match_python_line_iteration_across_chunk_edges() -> None:
    """The chunked line reader splits exactly where Python's universal-newline iteration does, whatever the chunk."""
    import io

    from inspector.agent.toolbox.builtin import _line_pieces

    @given(st.text(alphabet="ab\r\n", max_size=60), st.integers(1, 7))
    @settings(max_examples=examples(300), deadline=None)
    def prop(text: str, chunk: int) -> None:
        lines: list[str] = []
        cur = ""
        for piece, ends in _line_pieces(io.StringIO(text, newline=""), chunk):
            cur += piece
            if ends:
                lines.append(cur)
                cur = ""
        if cur:
            lines.append(cur)
        assert lines == list(io.StringIO(text, newline=""))

    prop()


# ------------------------------------------------------------------------------------ property: no path escapes
COMPONENTS = ["..", ".", "d", "e", "in_link", "out_link", "abs_out", "abs_in", "up", "loop", "f.txt", "s.txt"]


@pytest.fixture(scope="module")
def maze(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("maze")
    ws = base / "ws"
    (ws / "d" / "e").mkdir(parents=True)
    (base / "host" / "d" / "e").mkdir(parents=True)
    for where, text in [(ws, "inside"), (base / "host", "OUTSIDE")]:
        for sub in ["", "d", "d/e"]:
            (where / sub / "f.txt").write_text(f"{text}\n")
    (ws / "d" / "in_link").symlink_to("../d")
    (ws / "d" / "out_link").symlink_to("../../host/d")
    (ws / "abs_out").symlink_to(base / "host")
    (ws / "d" / "e" / "abs_in").symlink_to(ws / "d")
    (ws / "up").symlink_to("..")
    (ws / "loop").symlink_to("loop")
    (ws / "s.txt").symlink_to("d/e/f.txt")
    return ws


@given(st.lists(st.sampled_from(COMPONENTS), min_size=1, max_size=8))
@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_no_path_of_dots_and_symlinks_reaches_outside(maze: Path, parts: list[str]) -> None:
    """Any path built of `..`, `.`, directories and symlinks (relative, absolute, in, out, loops): every tool either
    refuses or shows what is inside the root."""
    path = "/".join(parts)
    tools = builtin_tools(maze)
    for name in ["read_file", "list_dir", "search_text"]:
        out = _call(tools[name].fn, {"path": path, "pattern": "side"})
        assert "OUTSIDE" not in out and "host" not in out, (name, path, out)
