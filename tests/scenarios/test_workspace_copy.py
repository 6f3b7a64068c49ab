"""A scenario's workspace copy is a boundary (issue 19): links copied as links and only inside, special files
skipped with a note, the temp dir removed on every failure."""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inspector.scenarios import workspace_copy
from inspector.scenarios.bundled import get_scenario
from inspector.scenarios.model import Scenario
from inspector.scenarios.workspace_copy import WorkspaceCopyError, copy_workspace
from inspector.testing.hyp import examples


@pytest.fixture
def src(tmp_path: Path) -> Path:
    ws = tmp_path / "src_ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "README.md").write_text("readme\n")
    (ws / "pkg" / "mod.py").write_text("x = 1\n")
    (ws / "pkg" / "__pycache__").mkdir()
    (ws / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\0")
    host = tmp_path / "host"
    host.mkdir()
    (host / "passwd").write_text("root:x:0:0 HOST SECRET\n")
    return ws


def _copy(src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Through Scenario.copy_workspace, as every caller does."""
    monkeypatch.setattr(Scenario, "workspace_path", property(lambda self: src))
    dest = get_scenario("parse_date").copy_workspace(tmp_path / "out")
    assert dest is not None and dest.parent.parent == tmp_path / "out"
    return dest


@pytest.fixture
def out(tmp_path: Path) -> Path:
    (tmp_path / "out").mkdir()
    return tmp_path / "out"


def test_a_symlink_out_of_the_workspace_is_not_copied_and_is_noted(
    src: Path, tmp_path: Path, out: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    (src / "passwd").symlink_to(tmp_path / "host" / "passwd")
    (src / "pkg" / "up").symlink_to("../../host")
    (src / "null").symlink_to("/dev/null")  # (/dev/zero the same way: the copy never reads it)
    with caplog.at_level(logging.WARNING, logger="inspector.scenarios"):
        dest = _copy(src, tmp_path, monkeypatch)
    assert not os.path.lexists(dest / "passwd") and not os.path.lexists(dest / "pkg" / "up")
    assert not os.path.lexists(dest / "null")
    assert sorted(r.getMessage() for r in caplog.records) == [
        "workspace copy: null: a symlink leading out of the workspace (or looping); not copied",
        "workspace copy: passwd: a symlink leading out of the workspace (or looping); not copied",
        "workspace copy: pkg/up: a symlink leading out of the workspace (or looping); not copied",
    ]
    assert (dest / "README.md").read_text() == "readme\n" and (dest / "pkg" / "mod.py").read_text() == "x = 1\n"
    assert not (dest / "pkg" / "__pycache__").exists()


def test_symlinks_inside_are_copied_as_relative_links_into_the_copy(
    src: Path, tmp_path: Path, out: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (src / "rel_link.md").symlink_to("README.md")
    (src / "pkg" / "abs_link.md").symlink_to(src / "README.md")  # absolute, into the source: re-pointed at the copy
    (src / "pkg" / "dir_link").symlink_to("..")
    (src / "dangling").symlink_to("not_yet")
    dest = _copy(src, tmp_path, monkeypatch)
    assert os.readlink(dest / "rel_link.md") == "README.md"
    assert os.readlink(dest / "pkg" / "abs_link.md") == "../README.md"
    assert os.readlink(dest / "pkg" / "dir_link") == ".."
    assert os.readlink(dest / "dangling") == "not_yet"
    for p in dest.rglob("*"):
        assert Path(os.path.realpath(p)).is_relative_to(dest.resolve()), p


@pytest.mark.parametrize("special", ["fifo", "socket"])
def test_special_files_are_skipped_with_a_note(
    src: Path,
    tmp_path: Path,
    out: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    special: str,
) -> None:
    if special == "fifo":
        os.mkfifo(src / "pkg" / "pipe")
    else:
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(src / "pkg" / "pipe"))
        s.close()
    with caplog.at_level(logging.WARNING, logger="inspector.scenarios"):
        dest = _copy(src, tmp_path, monkeypatch)  # (a FIFO opened for reading would block here forever)
    assert not os.path.lexists(dest / "pkg" / "pipe")
    what = "a FIFO (named pipe)" if special == "fifo" else "a socket"
    assert [r.getMessage() for r in caplog.records] == [f"workspace copy: pkg/pipe: {what}; not copied"]


def test_a_failure_mid_copy_removes_the_temp_dir_and_is_one_line(
    src: Path, tmp_path: Path, out: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = workspace_copy._copy_file
    calls = 0

    def failing(*a: Any, **kw: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise OSError(28, "No space left on device")
        return real(*a, **kw)

    monkeypatch.setattr(workspace_copy, "_copy_file", failing)
    monkeypatch.setattr(Scenario, "workspace_path", property(lambda self: src))
    with pytest.raises(WorkspaceCopyError, match=r"^cannot copy the workspace: No space left on device$"):
        get_scenario("parse_date").copy_workspace(out)
    assert list(out.iterdir()) == []


def test_a_copy_too_big_stops_and_cleans_up(src: Path, out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workspace_copy, "MAX_BYTES", 8)
    with pytest.raises(WorkspaceCopyError, match="more than"):
        copy_workspace(src, prefix="t-", dest_parent=out)
    assert list(out.iterdir()) == []


def test_the_bundled_workspace_copies_as_before(out: Path) -> None:
    s = get_scenario("parse_date")
    dest = s.copy_workspace(out)
    assert dest is not None and s.workspace_path is not None
    src_files = sorted(
        p.relative_to(s.workspace_path).as_posix()
        for p in s.workspace_path.rglob("*")
        if "__pycache__" not in p.parts and p.suffix != ".pyc" and ".pytest_cache" not in p.parts
    )
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*")) == src_files
    for rel in src_files:
        if (s.workspace_path / rel).is_file():
            assert (dest / rel).read_bytes() == (s.workspace_path / rel).read_bytes()


def test_a_hard_link_is_not_copied_and_is_noted(
    src: Path, tmp_path: Path, out: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A hard link in a scenario's own folder to a host file: the copy read it (the link is the host file) and the
    tools then read the copy's, a new file with one name. Not copied, with a note, as the tools do not read one; a
    bundled workspace's are copied (an installer such as uv links the package's files into its cache)."""
    os.link(tmp_path / "host" / "passwd", src / "pkg" / "hard.txt")
    sc = dataclasses.replace(get_scenario("parse_date"), name="mine", workspace=str(src), workspace_copy=True)
    assert not sc.workspace_bundled and get_scenario("parse_date").workspace_bundled
    with caplog.at_level(logging.WARNING, logger="inspector.scenarios"):
        dest = sc.copy_workspace(out)
    assert dest is not None and not os.path.lexists(dest / "pkg" / "hard.txt")
    assert (dest / "pkg" / "mod.py").read_text() == "x = 1\n"
    assert "workspace copy: pkg/hard.txt: a hard link (2 names: another may be outside the workspace); not copied" in (
        caplog.messages
    )
    trusted = copy_workspace(src, prefix="t-", dest_parent=out, hard_links=True)
    assert trusted is not None and (trusted / "pkg" / "hard.txt").read_text() == "root:x:0:0 HOST SECRET\n"


# ------------------------------------------------------------------------------------ property: any tree of kinds
KINDS = [
    "file",
    "dir",
    "link_in",
    "link_in_abs",
    "link_out",
    "link_out_abs",
    "link_up",
    "loop",
    "dangling",
    "fifo",
    "hard_out",
]


@given(st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 3)), min_size=1, max_size=12))
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_tree_copies_to_a_copy_that_never_leads_out(
    tmp_path_factory: pytest.TempPathFactory, entries: list[tuple[str, int]]
) -> None:
    base = tmp_path_factory.mktemp("tree")
    src, host = base / "ws", base / "host"
    src.mkdir()
    host.mkdir()
    (host / "secret").write_text("HOST")
    dirs = [src]
    for i, (k, d) in enumerate(entries):
        parent = dirs[d % len(dirs)]
        p = parent / f"e{i}"
        if k == "file":
            p.write_text(f"file {i}")
        elif k == "dir":
            p.mkdir()
            dirs.append(p)
        elif k == "link_in":
            p.symlink_to(os.path.relpath(src / "e0", parent))
        elif k == "link_in_abs":
            p.symlink_to(src)
        elif k == "link_out":
            p.symlink_to(os.path.relpath(host / "secret", parent))
        elif k == "link_out_abs":
            p.symlink_to(host)
        elif k == "link_up":
            p.symlink_to("../" * (len(p.relative_to(src).parts)))
        elif k == "loop":
            p.symlink_to(p.name)
        elif k == "dangling":
            p.symlink_to("nowhere")
        elif k == "hard_out":
            os.link(host / "secret", p)
        else:
            os.mkfifo(p)
    out = base / "out"
    out.mkdir()
    dest = copy_workspace(src, prefix="t-", dest_parent=out)
    assert dest is not None
    real_dest = dest.resolve()
    for p in dest.rglob("*"):
        if p.is_symlink() and not p.exists():
            assert Path(os.path.realpath(p)).is_relative_to(real_dest)  # dangling, but inside
            continue
        assert Path(os.path.realpath(p)).is_relative_to(real_dest), p
        assert p.is_dir() or p.is_file(), p  # no FIFO
        if p.is_file():
            assert p.read_text() != "HOST"
    for s in src.rglob("*"):
        rel = s.relative_to(src)
        if s.is_file() and not s.is_symlink() and s.stat().st_nlink > 1:
            assert not os.path.lexists(dest / rel)  # a hard link: not copied
        elif s.is_file() and not s.is_symlink():
            assert (dest / rel).read_text() == s.read_text()
