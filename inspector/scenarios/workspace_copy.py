"""A scenario's workspace copied into a fresh temp dir, as a boundary: nothing outside the source folder is read or
linked from the copy.

- Regular files are copied (content, permission bits, mtime), opened no-follow and non-blocking, checked by fstat.
- Directories are walked by descriptor, iteratively (any depth up to ``MAX_DEPTH``; deeper is an error, not a
  RecursionError).
- Symlinks are copied as symlinks, relative, when they resolve inside the source folder (walked by the toolbox's
  confined walker); one that leaves the folder or loops is dropped, with a note.
- A hard link (a regular file with more than one name: another may be outside the folder) is not copied, with a
  note, as the built-in tools do not read one; unless ``hard_links`` (a bundled workspace, which an installer such
  as uv may have linked into its cache).
- FIFOs, sockets and devices are skipped, with a note (never opened: a FIFO would block, /dev/zero never ends).
- The copy is bounded (``MAX_BYTES``); on any failure the temp dir is removed and ``WorkspaceCopyError`` (a one-line
  ``SourceError``) says why.

The notes are logged (logger ``inspector.scenarios``) and returned by ``copy_tree``.
"""

from __future__ import annotations

import logging
import os
import stat
import tempfile
from pathlib import Path

from inspector.agent.toolbox.confine import DIR_FLAGS, Changed, kind, open_entry, walk
from inspector.agent.toolbox.spec import ToolRefused
from inspector.core.errors import SourceError

__all__ = ["MAX_BYTES", "MAX_DEPTH", "WorkspaceCopyError", "copy_tree", "copy_workspace", "remove_tree"]

log = logging.getLogger("inspector.scenarios")

MAX_DEPTH = 256
MAX_BYTES = 2 * 1024**3  # 2 GiB: a workspace is source code, not a disk image
IGNORED_DIRS = frozenset({"__pycache__", ".pytest_cache"})
IGNORED_SUFFIXES = (".pyc",)
_CHUNK = 1 << 20
HARD_LINK_NOTE = "a hard link ({n} names: another may be outside the workspace); not copied"


class WorkspaceCopyError(SourceError):
    """The workspace could not be copied (the temp dir was removed)."""


def copy_workspace(
    src: Path | None, *, prefix: str, dest_parent: str | Path | None = None, hard_links: bool = False
) -> Path | None:
    """Copy ``src`` into a fresh temp dir (under ``dest_parent`` if given) and return the copy's path
    (``<tempdir>/<src.name>``); None when there is no workspace. The caller removes ``path.parent``."""
    if src is None:
        return None
    parent = Path(tempfile.mkdtemp(prefix=prefix, dir=dest_parent))
    dest = parent / src.name
    try:
        for note in copy_tree(src, dest, hard_links=hard_links):
            log.warning("workspace copy: %s", note)
    except BaseException:
        remove_tree(parent)
        raise
    return dest


def copy_tree(src: Path, dest: Path, *, hard_links: bool = False) -> list[str]:
    """Copy the folder ``src`` to ``dest`` (which must not exist) as the module doc says; the notes (what was
    dropped or skipped, with why) in walk order. WorkspaceCopyError on failure (``dest`` may be left partial: the
    caller removes it)."""
    notes: list[str] = []
    try:
        src_fd = os.open(src, DIR_FLAGS & ~getattr(os, "O_NOFOLLOW", 0))
    except OSError as e:
        raise WorkspaceCopyError(f"cannot copy the workspace {src}: {e.strerror or e}") from None
    try:
        os.mkdir(dest, 0o700)
        dest_fd = os.open(dest, DIR_FLAGS)
    except OSError as e:
        os.close(src_fd)
        raise WorkspaceCopyError(f"cannot create the workspace copy {dest}: {e.strerror or e}") from None
    total = 0
    stack: list[tuple[int, int, str, int]] = [(src_fd, dest_fd, "", 0)]  # (src dir fd, dest dir fd, rel/, depth)
    try:
        while stack:
            sfd, dfd, prefix, depth = stack.pop()
            try:
                with os.scandir(sfd) as it:
                    entries = sorted(it, key=lambda x: x.name)
                subdirs = []
                for entry in entries:
                    rel = prefix + entry.name
                    try:
                        st = os.lstat(entry.name, dir_fd=sfd)
                    except FileNotFoundError:
                        continue  # (removed since listed)
                    if stat.S_ISDIR(st.st_mode):
                        if entry.name in IGNORED_DIRS:
                            continue
                        if depth + 1 > MAX_DEPTH:
                            raise WorkspaceCopyError(
                                f"cannot copy the workspace: {rel} is deeper than {MAX_DEPTH} levels"
                            )
                        os.mkdir(entry.name, 0o700, dir_fd=dfd)
                        try:
                            sub_s = os.open(entry.name, DIR_FLAGS, dir_fd=sfd)
                        except OSError:
                            notes.append(f"{rel}: changed while copied; skipped")
                            continue
                        sub_d = os.open(entry.name, DIR_FLAGS, dir_fd=dfd)
                        os.chmod(entry.name, stat.S_IMODE(st.st_mode) | 0o700, dir_fd=dfd)
                        subdirs.append((sub_s, sub_d, rel + "/", depth + 1))
                    elif stat.S_ISLNK(st.st_mode):
                        target = _inside_target(src, rel)
                        if target is None:
                            notes.append(f"{rel}: a symlink leading out of the workspace (or looping); not copied")
                        else:
                            os.symlink(target, entry.name, dir_fd=dfd)
                    elif stat.S_ISREG(st.st_mode):
                        if entry.name.endswith(IGNORED_SUFFIXES):
                            continue
                        if st.st_nlink > 1 and not hard_links:
                            notes.append(f"{rel}: {HARD_LINK_NOTE.format(n=st.st_nlink)}")
                            continue
                        total += _copy_file(sfd, dfd, entry.name, st, rel, MAX_BYTES - total, notes, hard_links)
                    else:
                        notes.append(f"{rel}: {kind(st.st_mode)}; not copied")
                stack.extend(reversed(subdirs))
            finally:
                os.close(sfd)
                os.close(dfd)
    except OSError as e:
        raise WorkspaceCopyError(f"cannot copy the workspace: {e.strerror or e}") from None
    finally:
        for sfd, dfd, _, _ in stack:
            os.close(sfd)
            os.close(dfd)
    return notes


def _inside_target(src: Path, rel: str) -> str | None:
    """Where the symlink ``rel`` leads, as a relative link target, when it resolves inside ``src``; None if it
    leaves it or loops. (A dangling link inside the folder stays a link.)"""
    try:
        with walk(src, rel) as w:
            resolved = w.rel_path
    except ToolRefused:
        return None
    return os.path.relpath(resolved, os.path.dirname(rel) or ".")


def _copy_file(
    sfd: int, dfd: int, name: str, st: os.stat_result, rel: str, budget: int, notes: list[str], hard_links: bool
) -> int:
    try:
        fd = open_entry(sfd, name, st)
    except Changed:
        notes.append(f"{rel}: changed while copied; skipped")
        return 0
    copied = 0
    with os.fdopen(fd, "rb") as fin:
        nlink = os.fstat(fd).st_nlink  # (linked since the lstat: the descriptor's count is the truth)
        if nlink > 1 and not hard_links:
            notes.append(f"{rel}: {HARD_LINK_NOTE.format(n=nlink)}")
            return 0
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600, dir_fd=dfd)
        with os.fdopen(out, "wb") as fout:
            while chunk := fin.read(_CHUNK):
                copied += len(chunk)
                if copied > budget:
                    raise WorkspaceCopyError(
                        f"cannot copy the workspace: more than {MAX_BYTES // 1024**2} MiB (at {rel})"
                    )
                fout.write(chunk)
            os.fchmod(fout.fileno(), stat.S_IMODE(st.st_mode))
            os.utime(fout.fileno(), ns=(st.st_atime_ns, st.st_mtime_ns))
    return copied


def remove_tree(top: Path) -> None:
    """Remove a tree of any depth without recursion and without following a symlink; what cannot be removed is
    left (best effort, as ``shutil.rmtree(ignore_errors=True)``)."""
    stack: list[tuple[str, bool]] = [(str(top), False)]  # (directory, its entries already handled)
    while stack:
        d, handled = stack.pop()
        if handled:
            try:
                os.rmdir(d)
            except OSError:
                pass
            continue
        stack.append((d, True))
        try:
            with os.scandir(d) as it:
                for e in it:
                    if e.is_dir(follow_symlinks=False):
                        stack.append((e.path, False))
                    else:
                        try:
                            os.unlink(e.path)
                        except OSError:
                            pass
        except OSError:
            pass
