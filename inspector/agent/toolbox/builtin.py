"""Built-in tools: read-only workspace access (safe, run in parallel), an exclusive write tool (off by default) and a
cancellable sleep for demos. Every path is confined to the workspace root: opened component by component from the
root's descriptor, never followed by the kernel (see confine.py)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Protocol

import re2

from inspector.agent.toolbox.confine import (
    DIR_FLAGS,
    Changed,
    HardLinkRefused,
    hard_link_refusal,
    hard_linked,
    kind,
    open_entry,
    open_regular,
    resolve_in_root,
    shown,
    walk,
)
from inspector.agent.toolbox.spec import ToolRefused, ToolSpec, cancel_event

__all__ = ["builtin_tools", "resolve_in_root", "sleep_tool"]

READ_MAX_CHARS = 50_000
READ_DEFAULT_LIMIT = 2000  # lines
LIST_MAX_ENTRIES = 1000
SEARCH_DEFAULT_RESULTS = 50
SEARCH_MAX_RESULTS = 500
SEARCH_MAX_FILE_BYTES = 2_000_000
SEARCH_LINE_CHARS = 300
SLEEP_MAX_SECONDS = 600.0
SEARCH_MAX_DEPTH = 64  # directory levels below the searched path; deeper ones are skipped with a note
READ_CHUNK_CHARS = 65536
# characters read past the requested lines only to count the file's lines for the note: a huge file (or one that
# grows while read) is not read to its end (nor until the timeout) for the first lines
READ_COUNT_MAX_CHARS = 16 * 2**20
WRITE_RETRIES = 8
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
DIR_FLAGS_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "node_modules",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
    }
)


# --------------------------------------------------------------------------------------------------------- helpers
def _arg_int(inp: dict[str, Any], key: str, default: int, *, minimum: int = 0, maximum: int | None = None) -> int:
    v = inp.get(key, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
        raise ToolRefused(f"'{key}' must be an integer, got {v!r}")
    v = int(v)
    if v < minimum:
        raise ToolRefused(f"'{key}' must be >= {minimum}, got {v}")
    if maximum is not None and v > maximum:
        v = maximum
    return v


_CONTROL = re.compile("[\x00-\x1f\x7f]")


def _named(path: str) -> str:
    """A path as a result line shows it: as is, or JSON-quoted when it holds a control character (a newline in a
    file name would make one entry look like two, 'evil\\nREADME.md  (9 bytes)' a file that is not there), or that
    starts with a quote. The quoted form is what the model sends back as a JSON string."""
    quoted = _CONTROL.search(path) or path.startswith('"')  # (a name that starts with a quote: quoted too)
    return json.dumps(path, ensure_ascii=False) if quoted else path


def _is_binary(head: bytes) -> bool:
    return b"\x00" in head


_NEWLINE = re.compile(r"\r\n|\r|\n")


def _line_pieces(f: IO[str], chunk: int = READ_CHUNK_CHARS) -> Iterator[tuple[str, bool]]:
    """The text of ``f`` as (piece, ends_a_line) pairs, read ``chunk`` characters at a time: a line of any length is
    never held whole. Lines end at ``\n``, ``\r\n`` or ``\r`` (universal newlines, kept untranslated)."""
    carry = ""
    while True:
        data = f.read(chunk)
        if not data:
            if carry:
                yield carry, True  # (a lone \r at the very end)
            return
        data = carry + data
        carry = ""
        if data.endswith("\r"):  # maybe the first half of \r\n: wait for the next chunk
            data, carry = data[:-1], "\r"
        pos = 0
        for m in _NEWLINE.finditer(data):
            yield data[pos : m.end()], True
            pos = m.end()
        if pos < len(data):
            yield data[pos:], False


class _BytesPattern(Protocol):
    """What search_text uses of an RE2 pattern (the re2 module has no type information)."""

    def search(self, text: bytes) -> object: ...


def _compile_pattern(pattern: str, *, literal: bool, ignore_case: bool) -> tuple[_BytesPattern, str]:
    """The pattern compiled by RE2 (linear time: no pattern can make a search take exponential time, and no Python
    `re` is ever used), and a note for the result. A pattern RE2 cannot compile (invalid, or a feature RE2 does not
    have: backreferences, lookaround) is searched as plain text, and the note says so."""
    opts = re2.Options()
    opts.log_errors = False  # (RE2 logs parse errors to stderr otherwise)
    opts.case_sensitive = not ignore_case
    if literal:
        opts.literal = True
        return re2.compile(pattern, opts), ""
    try:
        return re2.compile(pattern, opts), ""
    except re2.error as e:
        msg = e.args[0].decode("utf-8", "replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        opts.literal = True
        return re2.compile(pattern, opts), (
            f"[not a valid regex for RE2 ({msg}); searched as plain text. RE2 runs in linear time and has no "
            "backreferences or lookaround]\n"
        )


# ------------------------------------------------------------------------------------------------------ the tools
def _make_read_file(root: Path, hard_links: bool) -> Callable[[dict[str, Any]], str]:
    def read_file(inp: dict[str, Any]) -> str:
        path = inp.get("path")
        fd, _rel = open_regular(
            root,
            path,
            missing="no such file: '{path}'",
            directory="'{path}' is a directory; use list_dir",
            hard_links=hard_links,
        )
        path = shown(str(path))  # (a non-empty string: open_regular checked)
        try:
            offset = _arg_int(inp, "offset", 1, minimum=1)
            limit = _arg_int(inp, "limit", READ_DEFAULT_LIMIT, minimum=1)
        except BaseException:
            os.close(fd)
            raise
        ev = cancel_event()
        out: list[str] = []
        size = 0
        last = offset - 1
        lineno = 1  # the line the next piece belongs to
        in_line = False  # a piece of line `lineno` was seen
        more_chars = False
        counted = True  # the file was read to its end: `total` is its line count
        past = 0  # characters read after the requested lines (only to count lines)
        with os.fdopen(fd, "rb") as raw:
            if _is_binary(raw.read(8192)):
                raise ToolRefused(f"'{path}' looks like a binary file; not shown")
            raw.seek(0)
            f = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="")
            for pieces, (piece, ends) in enumerate(_line_pieces(f)):
                if pieces % 64 == 0 and ev.is_set():
                    break
                if lineno >= offset + limit:
                    past += len(piece)
                    if past > READ_COUNT_MAX_CHARS:
                        counted = False
                        break
                elif offset <= lineno:
                    if size + len(piece) > READ_MAX_CHARS:
                        out.append(piece[: READ_MAX_CHARS - size])
                        more_chars = True
                        last = lineno
                        break  # (nothing more is returned: the rest is not read)
                    out.append(piece)
                    size += len(piece)
                    last = lineno
                in_line = not ends
                if ends:
                    lineno += 1
        total = lineno - (0 if in_line else 1)
        text = "".join(out)
        if offset > 1 and offset > total and not more_chars:
            return f"[file has {total} lines; offset {offset} is past the end]"
        notes = []
        if more_chars:
            notes.append(
                f"[truncated at {READ_MAX_CHARS} chars in line {last}; use offset={last} limit=... to read on]"
            )
        elif not counted:
            notes.append(f"[lines {offset}-{last} of at least {total}; use offset={last + 1} to read more]")
        elif last < total:
            notes.append(f"[lines {offset}-{last} of {total}; use offset={last + 1} to read more]")
        if notes:
            text = text + ("" if text.endswith("\n") or not text else "\n") + "\n".join(notes)
        return text

    return read_file


def _make_list_dir(root: Path, hard_links: bool = False) -> Callable[[dict[str, Any]], str]:
    def list_dir(inp: dict[str, Any]) -> str:
        path = inp.get("path", ".") or "."
        with walk(root, path) as w:
            if w.missing:  # (below a missing directory w.dir_fd is an ancestor: never listed as the path)
                raise ToolRefused(f"no such directory: '{shown(path)}'")
            if w.name is not None and w.st is not None:
                if stat.S_ISREG(w.st.st_mode):
                    raise ToolRefused(f"'{shown(path)}' is not a directory; use read_file")
                raise ToolRefused(f"'{shown(path)}' is {kind(w.st.st_mode)}: refused, not opened")
            try:
                with os.scandir(w.dir_fd) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError as err:
                raise ToolRefused(f"cannot list '{shown(path)}': {err.strerror or type(err).__name__}") from None
            lines = []
            for e in entries[:LIST_MAX_ENTRIES]:
                try:
                    mode = e.stat(follow_symlinks=False).st_mode
                    if stat.S_ISLNK(mode):
                        lines.append(f"{_named(e.name)}@")
                    elif stat.S_ISDIR(mode):
                        lines.append(f"{_named(e.name)}/")
                    elif stat.S_ISREG(mode):
                        est = e.stat(follow_symlinks=False)
                        if hard_linked(est) and not hard_links:  # (its size is the other name's: maybe outside)
                            lines.append(f"{_named(e.name)}  (a hard link: not read)")
                        else:
                            lines.append(f"{_named(e.name)}  ({est.st_size} bytes)")
                    else:
                        lines.append(f"{_named(e.name)}  ({kind(mode)})")
                except OSError:
                    lines.append(f"{_named(e.name)}  (unreadable)")
            header = f"{_named(w.rel_path)}: {len(entries)} entries"
        if len(entries) > LIST_MAX_ENTRIES:
            lines.append(f"[{len(entries) - LIST_MAX_ENTRIES} more entries not shown]")
        return header + ("\n" + "\n".join(lines) if lines else "")

    return list_dir


def _read_for_search(dir_fd: int, name: str, st: os.stat_result, hard_links: bool) -> bytes | None:
    """The bytes of a regular file to search (None: skipped, too big, changed since listed, or a hard link that is
    not trusted: the caller checked ``st`` and names it)."""
    if not stat.S_ISREG(st.st_mode) or st.st_size > SEARCH_MAX_FILE_BYTES:
        return None  # FIFO, socket, device: never opened
    try:
        fd = open_entry(dir_fd, name, st)
    except (Changed, OSError):
        return None
    with os.fdopen(fd, "rb") as fh:
        if not hard_links and hard_linked(os.fstat(fh.fileno())):  # (linked since the lstat)
            return None
        return fh.read(SEARCH_MAX_FILE_BYTES + 1)


def _make_search_text(root: Path, hard_links: bool) -> Callable[[dict[str, Any]], str]:
    def search_text(inp: dict[str, Any]) -> str:
        pattern = inp.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ToolRefused("'pattern' must be a non-empty string")
        path = inp.get("path", ".") or "."
        max_results = _arg_int(inp, "max_results", SEARCH_DEFAULT_RESULTS, minimum=1, maximum=SEARCH_MAX_RESULTS)
        rx, note = _compile_pattern(pattern, literal=bool(inp.get("literal")), ignore_case=bool(inp.get("ignore_case")))
        search = rx.search
        ev = cancel_event()
        hits: list[str] = []
        skipped: list[str] = []  # workspace-relative paths skipped, with why (never a host path)
        scanned = 0
        truncated = False

        def scan(rel: str, data: bytes | None) -> bool:
            """Search one file's bytes; False once enough matches were found."""
            nonlocal scanned
            if data is None or _is_binary(data[:8192]):
                return True
            scanned += 1
            for lineno, line in enumerate(data.splitlines(), start=1):
                if search(line):
                    if len(hits) >= max_results:
                        return False
                    text = line.decode("utf-8", errors="replace")
                    shown_line = text if len(text) <= SEARCH_LINE_CHARS else text[:SEARCH_LINE_CHARS] + "…"
                    hits.append(f"{_named(rel)}:{lineno}: {shown_line}")
            return True

        def linked_file(rel: str) -> bytes | None:
            """A symlinked file, walked from the root like any path (never followed out of it)."""
            try:
                fd, _ = open_regular(root, rel, missing="", directory="", hard_links=hard_links)
            except HardLinkRefused:
                skipped.append(f"{_named(rel)} (a hard link)")
                return None
            except ToolRefused as e:
                if str(e).endswith("is not a valid path"):
                    skipped.append(f"{_named(rel)} (symlink loop)")
                return None  # dangling, a directory, outside the root, special
            with os.fdopen(fd, "rb") as fh:
                if os.fstat(fh.fileno()).st_size > SEARCH_MAX_FILE_BYTES:
                    return None
                return fh.read(SEARCH_MAX_FILE_BYTES + 1)

        with walk(root, path) as w:
            if w.missing:  # (below a missing directory w.dir_fd is an ancestor: never searched as the path)
                raise ToolRefused(f"no such file or directory: '{shown(path)}'")
            if w.name is not None and w.st is not None:  # one file
                if not stat.S_ISREG(w.st.st_mode):
                    raise ToolRefused(f"'{shown(path)}' is {kind(w.st.st_mode)}: refused, not opened")
                if hard_linked(w.st) and not hard_links:
                    raise hard_link_refusal(path, w.st)
                scan(w.rel_path, _read_for_search(w.dir_fd, w.name, w.st, hard_links))
            else:  # a tree, depth first, each directory opened by descriptor (never a path), no symlink followed
                top = w.rel_path
                stack: list[tuple[int, str, int]] = [(os.dup(w.dir_fd), "" if top == "." else top + "/", 0)]
                try:
                    while stack and not truncated:
                        dfd, prefix, depth = stack.pop()
                        try:
                            try:
                                with os.scandir(dfd) as it:
                                    entries = sorted(it, key=lambda e: e.name)
                            except OSError:
                                continue
                            subdirs: list[tuple[int, str, int]] = []
                            for e in entries:
                                if ev.is_set():
                                    return note + "[search cancelled]"
                                rel = prefix + e.name
                                try:
                                    est = e.stat(follow_symlinks=False)
                                except OSError:
                                    continue
                                if stat.S_ISDIR(est.st_mode):
                                    if e.name in SKIP_DIRS:
                                        continue
                                    if depth + 1 > SEARCH_MAX_DEPTH:
                                        skipped.append(f"{_named(rel)} (deeper than {SEARCH_MAX_DEPTH} levels)")
                                        continue
                                    try:
                                        sub = os.open(e.name, DIR_FLAGS, dir_fd=dfd)
                                    except OSError:
                                        continue  # (swapped for a symlink since listed: not followed)
                                    subdirs.append((sub, rel + "/", depth + 1))
                                    continue
                                if hard_linked(est) and not hard_links:
                                    skipped.append(f"{_named(rel)} (a hard link)")
                                    continue
                                data = (
                                    linked_file(rel)
                                    if stat.S_ISLNK(est.st_mode)
                                    else _read_for_search(dfd, e.name, est, hard_links)
                                )
                                if not scan(rel, data):
                                    truncated = True
                                    break
                            stack.extend(reversed(subdirs))
                        finally:
                            os.close(dfd)
                finally:
                    for dfd, _, _ in stack:
                        os.close(dfd)
        if skipped:
            more = f" and {len(skipped) - 20} more" if len(skipped) > 20 else ""
            note += f"[skipped: {', '.join(skipped[:20])}{more}]\n"
        if not hits:
            return note + f"no matches for {pattern!r} in {scanned} files"
        tail = f"\n[stopped at {max_results} matches; narrow the pattern or path]" if truncated else ""
        return note + "\n".join(hits) + tail

    return search_text


def _make_write_file(root: Path, allow_write: bool) -> Callable[[dict[str, Any]], str]:
    def write_file(inp: dict[str, Any]) -> str:
        if not allow_write:
            raise ToolRefused("write_file is disabled: start with --allow-write")
        path = inp.get("path")
        content = inp.get("content")
        if isinstance(path, str) and path.strip() and not isinstance(content, str):
            raise ToolRefused("'content' must be a string")
        data = content.encode("utf-8") if isinstance(content, str) else b""
        with walk(root, path):  # a path refused (outside, too deep...) is refused before any directory is made
            pass
        for _attempt in range(WRITE_RETRIES):
            with walk(root, path, mkdirs=True) as w:
                path = shown(str(path))  # (a non-empty string: walk checked)
                if not isinstance(content, str):
                    raise ToolRefused("'content' must be a string")
                if w.name is None:
                    raise ToolRefused(f"'{path}' is a directory")
                if w.st is not None and not stat.S_ISREG(w.st.st_mode):
                    raise ToolRefused(f"'{path}' is {kind(w.st.st_mode)}: refused, not opened")
                try:
                    linked = _write(w.dir_fd, w.name, data, w.st, path)
                except Changed:
                    continue
                note = (
                    " (it was a hard link: replaced by a new file; its other links keep the old content)"
                    if linked
                    else ""
                )
                return f"wrote {len(data)} bytes to {w.rel_path}{note}"
        raise ToolRefused(f"'{path}' kept changing while it was written; refused")

    return write_file


def _write(dir_fd: int, name: str, data: bytes, st: os.stat_result | None, path: str) -> bool:
    """Write ``data`` as the file ``name`` of ``dir_fd`` (``st``: its lstat, None if it does not exist); True when it
    was a hard link, replaced (never written through: its other names may be outside the workspace). Changed if
    the entry changed since the lstat."""
    flags = os.O_WRONLY | os.O_NONBLOCK | DIR_FLAGS_NOFOLLOW | _O_CLOEXEC
    try:
        if st is None:
            try:
                fd = os.open(name, flags | os.O_CREAT | os.O_EXCL, 0o666, dir_fd=dir_fd)
            except FileExistsError:
                raise Changed from None
        elif st.st_nlink > 1:
            _replace(dir_fd, name, data, st, path)
            return True
        else:
            fd = open_entry(dir_fd, name, st, os.O_WRONLY)
            if os.fstat(fd).st_nlink > 1:  # (linked since the lstat: the descriptor's count is the truth)
                os.close(fd)
                _replace(dir_fd, name, data, st, path)
                return True
    except OSError as e:
        raise ToolRefused(f"cannot write '{path}': {e.strerror or type(e).__name__}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            os.set_blocking(f.fileno(), True)
            f.truncate(0)
            f.write(data)
    except OSError as e:
        raise ToolRefused(f"cannot write '{path}': {e.strerror or type(e).__name__}") from None
    return False


def _replace(dir_fd: int, name: str, data: bytes, old: os.stat_result | None, path: str) -> None:
    """Write a new file next to ``name`` and rename it over ``name``: the old file is never opened for writing, so a
    hard link (or a file swapped in meanwhile) to something outside the workspace is replaced, not written through.
    The old file's permission bits are kept."""
    tmp = f".{secrets.token_hex(8)}.inspector-write.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | DIR_FLAGS_NOFOLLOW | _O_CLOEXEC, 0o666, dir_fd=dir_fd)
    except OSError as e:
        raise ToolRefused(f"cannot write '{path}': {e.strerror or type(e).__name__}") from None
    try:
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                if old is not None:
                    os.fchmod(f.fileno(), stat.S_IMODE(old.st_mode))
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError as e:
            raise ToolRefused(f"cannot write '{path}': {e.strerror or type(e).__name__}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


async def sleep_tool(inp: dict[str, Any]) -> str:
    seconds = inp.get("seconds", 1)
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
        raise ToolRefused(f"'seconds' must be a number >= 0, got {seconds!r}")
    seconds = min(float(seconds), SLEEP_MAX_SECONDS)
    await asyncio.sleep(seconds)
    return f"slept {seconds:g} s"


def builtin_tools(root: Path, *, allow_write: bool = False, hard_links: bool = False) -> dict[str, ToolSpec]:
    """The built-in tools over the workspace ``root``. ``hard_links``: read files with more than one name (refused
    otherwise, as another name may be outside the root: confine.py); for a workspace whose links are known, a
    bundled one an installer may have linked into its cache."""
    root = Path(root)
    specs = [
        ToolSpec(
            name="read_file",
            description=(
                "Read a UTF-8 text file from the workspace. `path` is relative to the workspace root. "
                f"Returns the file's text; by default up to {READ_DEFAULT_LIMIT} lines and {READ_MAX_CHARS} characters, "
                "with a note saying how to read on. Use `offset` (1-based first line) and `limit` (number of lines) "
                "for large files. Binary files are refused."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path relative to the workspace root."},
                    "offset": {"type": "integer", "minimum": 1, "description": "First line to return (1-based)."},
                    "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines."},
                },
                "required": ["path"],
                "additionalProperties": False,
            },
            fn=_make_read_file(root, hard_links),
            concurrency_safe=True,
            timeout=30,
        ),
        ToolSpec(
            name="list_dir",
            description=(
                "List a directory of the workspace: one entry per line, directories end with '/', symlinks with '@', "
                f"files show their size. At most {LIST_MAX_ENTRIES} entries. `path` defaults to the workspace root. "
                "A name with a control character (or a leading quote) is shown as a JSON string."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "Directory relative to the workspace root (default '.').",
                        "default": ".",
                    },
                },
                "additionalProperties": False,
            },
            fn=_make_list_dir(root, hard_links),
            concurrency_safe=True,
            timeout=30,
        ),
        ToolSpec(
            name="search_text",
            description=(
                "Search the text files under a workspace path for lines matching a regular expression (RE2 syntax, "
                "linear time: no backreferences or lookaround; a pattern RE2 rejects is searched as plain text; set "
                "`literal` to always search plain text). "
                "Returns 'path:line: text' lines. Skips binary files, files over 2 MB and directories such as .git, "
                ".venv and node_modules."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression (RE2 syntax) or plain text."},
                    "path": {
                        "type": "string",
                        "description": "File or directory relative to the workspace root (default '.').",
                        "default": ".",
                    },
                    "max_results": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": SEARCH_MAX_RESULTS,
                        "description": f"Maximum matching lines (default {SEARCH_DEFAULT_RESULTS}).",
                    },
                    "literal": {"type": "boolean", "description": "Treat the pattern as plain text."},
                    "ignore_case": {"type": "boolean", "description": "Case-insensitive match."},
                },
                "required": ["pattern"],
                "additionalProperties": False,
            },
            fn=_make_search_text(root, hard_links),
            concurrency_safe=True,
            timeout=60,
        ),
        ToolSpec(
            name="write_file",
            description=(
                "Create or overwrite a text file in the workspace with `content` (UTF-8); parent directories are "
                "created. Runs alone: no other tool runs at the same time. "
                + ("" if allow_write else "Currently disabled: every call is refused (start with --allow-write).")
            ).strip(),
            input_schema={
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path relative to the workspace root."},
                    "content": {"type": "string", "description": "The complete new content of the file."},
                },
                "required": ["path", "content"],
                "additionalProperties": False,
            },
            fn=_make_write_file(root, allow_write),
            concurrency_safe=False,
            timeout=30,
            meta={"writes": True, "enabled": allow_write},
        ),
        ToolSpec(
            name="sleep",
            description=(
                "Wait for `seconds` (at most 600) and return. Does nothing else: useful to demonstrate parallel "
                "tool execution and cancellation."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "seconds": {
                        "type": "number",
                        "minimum": 0,
                        "maximum": SLEEP_MAX_SECONDS,
                        "description": "How long to wait.",
                    },
                },
                "required": ["seconds"],
                "additionalProperties": False,
            },
            fn=sleep_tool,
            concurrency_safe=True,
        ),
    ]
    return {s.name: s for s in specs}
