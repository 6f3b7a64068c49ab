"""Paths confined to a workspace root, without a check-then-open race.

A path is walked one component at a time, each opened relative to the directory descriptor of the one before with
no-follow semantics (``O_NOFOLLOW``, ``O_DIRECTORY`` for directories, ``dir_fd=`` for every call). A symlink is never
followed by the kernel: its target is read and walked the same way, from the directory it sits in (or from the root,
for an absolute target under the root); ``..`` goes back to the descriptor of the parent already walked, never above
the root. Whatever is swapped in while a path is walked (a directory flipped into a symlink, a file into a FIFO), the
object opened is inside the root, or the call is refused: the identity of every opened object is checked against the
``lstat`` that decided how to open it (a mismatch is retried, then refused).

This is what ``openat2(RESOLVE_IN_ROOT)`` gives on recent Linux kernels; Python has no binding for it.

A hard link is not a path: a name inside the root and one outside it can be the same file, and nothing in the file
says which name is the original. So a regular file with more than one name (``st_nlink > 1``) is not read
(``open_regular`` refuses it, with ``hard_link_refusal``'s one line) unless the caller trusts the root's hard links
(a bundled workspace, whose files an installer such as uv links into its cache); ``write_file`` never writes through
one (it replaces the name, builtin.py).
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from inspector.agent.toolbox.spec import ToolRefused

MAX_SYMLINKS = 40  # as the kernel's ELOOP limit
MAX_DEPTH = 256  # directory levels below the root
MAX_PATH_CHARS = 4096  # PATH_MAX
RETRIES = 8  # a component that changes between its lstat and its open is walked again, this many times

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
DIR_FLAGS = os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC
_RACED = {errno.ELOOP, errno.ENOTDIR, errno.ENOENT, errno.EISDIR, errno.ENXIO}


def shown(path: str, limit: int = 120) -> str:
    """A path as echoed in an error message: cut when very long (a 2,000-level path is not repeated whole)."""
    return path if len(path) <= limit else path[: limit - 1] + "…"


def kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _strerror(e: OSError) -> str:
    return e.strerror or type(e).__name__


@dataclass
class Walked:
    """Where a path ended. ``dirs`` are the open descriptors of the directories walked (``dirs[0]`` is the root's,
    ``dirs[-1]`` the directory holding ``name``); ``rel`` their names below the root. ``name`` is None when the path
    is a directory itself (then ``dirs[-1]`` is it); else ``st`` is its lstat (never a symlink), None if it does not
    exist. Close it (a context manager)."""

    dirs: list[int]
    rel: list[str]
    name: str | None = None
    st: os.stat_result | None = None
    lexical_tail: list[str] = field(default_factory=list)  # components below a missing directory (not walked)

    @property
    def dir_fd(self) -> int:
        return self.dirs[-1]

    @property
    def missing(self) -> bool:
        """The path does not exist: its last component is missing, or a directory on the way is (then ``name`` is
        None and ``dirs[-1]`` is only the deepest directory that exists, not the path)."""
        return bool(self.lexical_tail) or (self.name is not None and self.st is None)

    @property
    def rel_path(self) -> str:
        parts = self.rel + ([self.name] if self.name is not None else []) + self.lexical_tail
        return "/".join(parts) or "."

    def close(self) -> None:
        while self.dirs:
            os.close(self.dirs.pop())

    def __enter__(self) -> Walked:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Changed(Exception):
    """The entry changed between its lstat and its open (a race): walk again."""


def _split(path: str) -> list[str]:
    return [c for c in path.split("/") if c not in ("", ".")]


def _check_path(path: object) -> str:
    if not isinstance(path, str) or not path.strip():
        raise ToolRefused("'path' must be a non-empty string, relative to the workspace root")
    if Path(path).is_absolute() or path.startswith(("/", "\\")) or Path(path).drive:
        raise ToolRefused(f"path '{shown(path)}' is outside the workspace root")
    if "\x00" in path:
        raise ToolRefused(f"path '{shown(path)}' is not a valid path")
    if len(path) > MAX_PATH_CHARS:
        raise ToolRefused(f"path '{shown(path)}' is too long: {len(path)} characters (at most {MAX_PATH_CHARS})")
    return path


def _root_prefixes(root: Path) -> list[list[str]]:
    """The root's absolute spellings (as given, and resolved): an absolute symlink target under one of them is walked
    from the root."""
    out = [_split(str(root.resolve()))]
    given = _split(os.path.abspath(root))
    if given != out[0]:
        out.append(given)
    return out


def walk(root: Path, path: object, *, mkdirs: bool = False) -> Walked:
    """Walk ``path`` (relative to ``root``) inside the root; see the module doc. ToolRefused when it leaves the root,
    loops, is too deep or cannot be walked. ``mkdirs``: missing directories on the way are created (inside the root:
    each with ``mkdir(name, dir_fd=...)``). With ``mkdirs`` off, the components below a missing directory are applied
    lexically (``lexical_tail``), for a caller that only wants to name the path."""
    path = _check_path(path)
    try:
        root_fd = os.open(root, DIR_FLAGS & ~_O_NOFOLLOW)  # (the root itself may be a symlink: the user chose it)
    except OSError as e:
        raise ToolRefused(f"cannot open the workspace root: {_strerror(e)}") from None
    w = Walked(dirs=[root_fd], rel=[])
    try:
        _walk(w, root, path, mkdirs)
    except BaseException:
        w.close()
        raise
    return w


def _walk(w: Walked, root: Path, path: str, mkdirs: bool) -> None:
    todo = _split(path)
    todo.reverse()  # a stack: the next component is todo[-1]
    links = 0
    prefixes: list[list[str]] | None = None
    while todo:
        name = todo.pop()
        if name == ".":
            continue
        if name == "..":
            if w.lexical_tail:
                w.lexical_tail.pop()
            elif len(w.dirs) == 1:
                raise ToolRefused(f"path '{shown(path)}' is outside the workspace root")
            else:
                os.close(w.dirs.pop())
                w.rel.pop()
            continue
        if w.lexical_tail:  # below a missing directory: named, not walked
            _name_missing(w, name, path, last=not todo)
            continue
        last = not todo
        for _attempt in range(RETRIES):
            cur = w.dirs[-1]
            try:
                st = os.lstat(name, dir_fd=cur)
            except FileNotFoundError:
                if last:
                    w.name, w.st = name, None
                    break
                if mkdirs:
                    try:
                        os.mkdir(name, 0o777, dir_fd=cur)
                    except FileExistsError:
                        pass  # (raced: walk it again)
                    except OSError as e:
                        raise ToolRefused(f"cannot create the directory of '{shown(path)}': {_strerror(e)}") from None
                    continue
                _name_missing(w, name, path, last=False)
                break
            except ValueError:
                raise ToolRefused(f"path '{shown(path)}' is not a valid path") from None
            except OSError as e:
                if e.errno == errno.ENAMETOOLONG:
                    raise ToolRefused(f"path '{shown(path)}' is not a valid path") from None
                raise ToolRefused(f"cannot access '{shown(path)}': {_strerror(e)}") from None
            if stat.S_ISLNK(st.st_mode):
                links += 1
                if links > MAX_SYMLINKS:
                    raise ToolRefused(f"path '{shown(path)}' is not a valid path")  # a symlink loop
                try:
                    target = os.readlink(name, dir_fd=cur)
                except OSError:
                    continue  # (swapped since the lstat)
                parts = _split(target)
                if target.startswith("/"):
                    prefixes = prefixes or _root_prefixes(root)
                    for pre in prefixes:
                        if parts[: len(pre)] == pre:
                            parts = parts[len(pre) :]
                            break
                    else:
                        raise ToolRefused(f"path '{shown(path)}' is outside the workspace root")
                    while len(w.dirs) > 1:  # walked again from the root
                        os.close(w.dirs.pop())
                    w.rel.clear()
                todo.extend(reversed(parts))
                break
            if stat.S_ISDIR(st.st_mode):
                if len(w.dirs) > MAX_DEPTH:
                    raise ToolRefused(
                        f"path '{shown(path)}' is too deep: more than {MAX_DEPTH} directory levels below the root"
                    )
                try:
                    fd = os.open(name, DIR_FLAGS, dir_fd=cur)
                except OSError as e:
                    if e.errno in _RACED:
                        continue
                    raise ToolRefused(f"cannot open '{shown(path)}': {_strerror(e)}") from None
                if not _same(os.fstat(fd), st):
                    os.close(fd)
                    continue
                w.dirs.append(fd)
                w.rel.append(name)
                break
            if not last:
                raise ToolRefused(f"cannot access '{shown(path)}': Not a directory")
            w.name, w.st = name, st
            break
        else:
            raise ToolRefused(f"'{shown(path)}' kept changing while it was opened; refused")


def _name_missing(w: Walked, name: str, path: str, *, last: bool) -> None:
    """``name`` (a missing directory, or below one) added to the lexical tail; a directory level counts towards
    MAX_DEPTH as a walked one does, so that a path refused when its directories are made (write_file) is refused
    by a walk that makes none."""
    w.lexical_tail.append(name)
    if not last and len(w.dirs) - 1 + len(w.lexical_tail) > MAX_DEPTH:
        raise ToolRefused(f"path '{shown(path)}' is too deep: more than {MAX_DEPTH} directory levels below the root")


def open_entry(dir_fd: int, name: str, st: os.stat_result, flags: int = os.O_RDONLY) -> int:
    """Open the entry ``name`` of ``dir_fd`` that ``st`` (its lstat, a regular file) describes: no-follow and
    non-blocking, then checked to be that very file (Changed if it was swapped). The descriptor is blocking."""
    try:
        fd = os.open(name, flags | os.O_NONBLOCK | _O_NOFOLLOW | _O_CLOEXEC, dir_fd=dir_fd)
    except OSError as e:
        if e.errno in _RACED:
            raise Changed from None
        raise
    try:
        if not _same(os.fstat(fd), st):
            raise Changed
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def hard_linked(st: os.stat_result) -> bool:
    """A regular file with more than one name: one of the others may be outside the workspace."""
    return stat.S_ISREG(st.st_mode) and st.st_nlink > 1


class HardLinkRefused(ToolRefused):
    """A file with more than one name, not read (see the module doc)."""


def hard_link_refusal(path: str, st: os.stat_result) -> HardLinkRefused:
    return HardLinkRefused(
        f"'{shown(path)}' is a hard link ({st.st_nlink} names: another may be outside the workspace): refused, not read"
    )


def open_regular(
    root: Path, path: object, *, missing: str, directory: str, hard_links: bool = False
) -> tuple[int, str]:
    """A regular file inside the root opened for reading, and its path below the root. ToolRefused with ``missing``
    or ``directory`` (formatted with ``path``) when it does not exist or is a directory; for a FIFO, socket or device
    (never opened); when it leaves the root; for a hard link (a file with more than one name: see the module doc),
    unless ``hard_links``."""
    path = _check_path(path)  # (walk's first check, made here too: a string from here on)
    for _attempt in range(RETRIES):
        with walk(root, path) as w:
            if w.missing:  # (checked first: below a missing directory, name is None too)
                raise ToolRefused(missing.format(path=shown(path)))
            if w.name is None or w.st is None:
                raise ToolRefused(directory.format(path=shown(path)))
            if not stat.S_ISREG(w.st.st_mode):
                raise ToolRefused(f"'{shown(path)}' is {kind(w.st.st_mode)}: refused, not opened")
            if hard_linked(w.st) and not hard_links:
                raise hard_link_refusal(path, w.st)
            try:
                fd = open_entry(w.dir_fd, w.name, w.st)
            except Changed:
                continue
            except OSError as e:
                raise ToolRefused(f"cannot open '{shown(path)}': {_strerror(e)}") from None
            st = os.fstat(fd)  # (linked since the lstat: the descriptor's count is the truth)
            if hard_linked(st) and not hard_links:
                os.close(fd)
                raise hard_link_refusal(path, st)
            return fd, w.rel_path
    raise ToolRefused(f"'{shown(path)}' kept changing while it was opened; refused")


def resolve_in_root(root: Path, path: object) -> Path:
    """`path` (relative to root) as a host path inside the root (symlinks resolved, each inside the root), or
    ToolRefused if it is absolute or leaves the root (via `..` or a symlink). For naming a path only: the tools open
    through `walk`, never through the returned path."""
    with walk(root, path) as w:
        rel = w.rel_path
    return root.resolve() if rel == "." else root.resolve() / rel
