"""Built-in tools: read-only workspace access (safe, run in parallel), an exclusive write tool (off by default) and a
cancellable sleep for demos. Every path is confined to the workspace root."""

from __future__ import annotations

import asyncio
import errno
import io
import os
import stat
from pathlib import Path
from typing import IO, Any

import re2

from inspector.agent.toolbox.spec import ToolRefused, ToolSpec, cancel_event

READ_MAX_CHARS = 50_000
READ_DEFAULT_LIMIT = 2000  # lines
LIST_MAX_ENTRIES = 1000
SEARCH_DEFAULT_RESULTS = 50
SEARCH_MAX_RESULTS = 500
SEARCH_MAX_FILE_BYTES = 2_000_000
SEARCH_LINE_CHARS = 300
SLEEP_MAX_SECONDS = 600.0
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
def resolve_in_root(root: Path, path: Any) -> Path:
    """`path` (relative to root) resolved, or ToolRefused if it is absolute or leaves the root (via `..` or a
    symlink)."""
    if not isinstance(path, str) or not path.strip():
        raise ToolRefused("'path' must be a non-empty string, relative to the workspace root")
    root_r = root.resolve()
    p = Path(path)
    if p.is_absolute() or p.drive or path.startswith(("/", "\\")):
        raise ToolRefused(f"path '{path}' is outside the workspace root")
    try:
        full = (root_r / p).resolve()
    except (OSError, ValueError, RuntimeError):  # NUL byte, symlink loop
        raise ToolRefused(f"path '{path}' is not a valid path") from None
    if not full.is_relative_to(root_r):
        raise ToolRefused(f"path '{path}' is outside the workspace root")
    return full


def _rel(root: Path, full: Path) -> str:
    rel = full.relative_to(root.resolve()).as_posix()
    return rel or "."


def _arg_int(inp: dict, key: str, default: int, *, minimum: int = 0, maximum: int | None = None) -> int:
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


def _is_binary(head: bytes) -> bool:
    return b"\x00" in head


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _refuse_special(full: Path, path: str) -> os.stat_result | None:
    """stat() `full` without opening it: None if it does not exist; ToolRefused for a FIFO, socket or device (opening
    one can block a worker thread forever, or have side effects)."""
    try:
        st = full.stat()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ToolRefused(f"cannot access '{path}': {e.strerror or type(e).__name__}") from None
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise ToolRefused(f"'{path}' is {_kind(st.st_mode)}: refused, not opened")
    return st


def _open_regular(full: Path, path: str, flags: int = os.O_RDONLY, mode: str = "rb") -> IO[bytes]:
    """Open a regular file without ever blocking on a special one: O_NONBLOCK (a FIFO opens at once), then fstat on
    the descriptor (no race with a swap after an earlier stat). ToolRefused for anything but a regular file."""
    try:
        fd = os.open(full, flags | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as e:
        raise ToolRefused(f"cannot open '{path}': {e.strerror or type(e).__name__}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ToolRefused(f"'{path}' is {_kind(st.st_mode)}: refused, not opened")
        os.set_blocking(fd, True)
        return os.fdopen(fd, mode)
    except BaseException:
        os.close(fd)
        raise


def _compile_pattern(pattern: str, *, literal: bool, ignore_case: bool) -> tuple[Any, str]:
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
def _make_read_file(root: Path):
    def read_file(inp: dict) -> str:
        full = resolve_in_root(root, inp.get("path"))
        path = inp["path"]
        st = _refuse_special(full, path)
        if st is None:
            raise ToolRefused(f"no such file: '{path}'")
        if stat.S_ISDIR(st.st_mode):
            raise ToolRefused(f"'{path}' is a directory; use list_dir")
        offset = _arg_int(inp, "offset", 1, minimum=1)
        limit = _arg_int(inp, "limit", READ_DEFAULT_LIMIT, minimum=1)
        ev = cancel_event()
        out: list[str] = []
        size = 0
        last = offset - 1
        total = 0
        more_chars = False
        with _open_regular(full, path) as raw:
            if _is_binary(raw.read(8192)):
                raise ToolRefused(f"'{path}' looks like a binary file; not shown")
            raw.seek(0)
            f = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="")
            for lineno, line in enumerate(f, start=1):
                total = lineno
                if lineno % 4096 == 0 and ev.is_set():
                    break
                if lineno < offset or more_chars or lineno >= offset + limit:
                    continue
                if size + len(line) > READ_MAX_CHARS:
                    out.append(line[: READ_MAX_CHARS - size])
                    more_chars = True
                    last = lineno
                    continue
                out.append(line)
                size += len(line)
                last = lineno
        text = "".join(out)
        if offset > 1 and offset > total:
            return f"[file has {total} lines; offset {offset} is past the end]"
        notes = []
        if more_chars:
            notes.append(
                f"[truncated at {READ_MAX_CHARS} chars in line {last}; use offset={last} limit=... to read on]"
            )
        elif last < total:
            notes.append(f"[lines {offset}-{last} of {total}; use offset={last + 1} to read more]")
        if notes:
            text = text + ("" if text.endswith("\n") or not text else "\n") + "\n".join(notes)
        return text

    return read_file


def _make_list_dir(root: Path):
    def list_dir(inp: dict) -> str:
        path = inp.get("path", ".") or "."
        full = resolve_in_root(root, path)
        st = _refuse_special(full, path)
        if st is None:
            raise ToolRefused(f"no such directory: '{path}'")
        if not stat.S_ISDIR(st.st_mode):
            raise ToolRefused(f"'{path}' is not a directory; use read_file")
        try:
            entries = sorted(os.scandir(full), key=lambda e: e.name)
        except OSError as err:
            raise ToolRefused(f"cannot list '{path}': {err.strerror or type(err).__name__}") from None
        lines = []
        for e in entries[:LIST_MAX_ENTRIES]:
            try:
                if e.is_symlink():
                    lines.append(f"{e.name}@")
                elif e.is_dir():
                    lines.append(f"{e.name}/")
                else:
                    mode = e.stat(follow_symlinks=False).st_mode
                    if stat.S_ISREG(mode):
                        lines.append(f"{e.name}  ({e.stat().st_size} bytes)")
                    else:
                        lines.append(f"{e.name}  ({_kind(mode)})")
            except OSError:
                lines.append(f"{e.name}  (unreadable)")
        header = f"{_rel(root, full)}: {len(entries)} entries"
        if len(entries) > LIST_MAX_ENTRIES:
            lines.append(f"[{len(entries) - LIST_MAX_ENTRIES} more entries not shown]")
        return header + ("\n" + "\n".join(lines) if lines else "")

    return list_dir


def _make_search_text(root: Path):
    def search_text(inp: dict) -> str:
        pattern = inp.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ToolRefused("'pattern' must be a non-empty string")
        path = inp.get("path", ".") or "."
        start = resolve_in_root(root, path)
        st = _refuse_special(start, path)
        if st is None:
            raise ToolRefused(f"no such file or directory: '{path}'")
        max_results = _arg_int(inp, "max_results", SEARCH_DEFAULT_RESULTS, minimum=1, maximum=SEARCH_MAX_RESULTS)
        rx, note = _compile_pattern(pattern, literal=bool(inp.get("literal")), ignore_case=bool(inp.get("ignore_case")))
        search = rx.search
        root_r = root.resolve()
        ev = cancel_event()
        hits: list[str] = []
        skipped: list[str] = []  # workspace-relative paths skipped, with why (never a host path)
        scanned = 0

        def files():
            if stat.S_ISREG(st.st_mode):
                yield start
                return
            for dirpath, dirnames, filenames in os.walk(start, followlinks=False):
                dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
                for name in sorted(filenames):
                    yield Path(dirpath) / name

        truncated = False
        for f in files():
            if ev.is_set():
                return note + "[search cancelled]"
            shown_path = f.relative_to(root_r).as_posix() if f.is_relative_to(root_r) else f.name
            try:
                real = f.resolve(strict=True)
            except RuntimeError:  # a symlink loop (Python 3.11 raises RuntimeError; later versions OSError ELOOP)
                skipped.append(f"{shown_path} (symlink loop)")
                continue
            except OSError as e:
                if e.errno == errno.ELOOP:
                    skipped.append(f"{shown_path} (symlink loop)")
                continue  # a dangling symlink, or unreadable
            try:
                if not real.is_relative_to(root_r):
                    continue  # symlink leaving the root
                fst = real.stat()
                if not stat.S_ISREG(fst.st_mode):
                    continue  # FIFO, socket, device: never opened
                if fst.st_size > SEARCH_MAX_FILE_BYTES:
                    continue
                with _open_regular(real, shown_path) as fh:
                    data = fh.read(SEARCH_MAX_FILE_BYTES + 1)
            except (OSError, ToolRefused):
                continue
            if _is_binary(data[:8192]):
                continue
            scanned += 1
            rel = f.relative_to(root_r).as_posix() if f.is_relative_to(root_r) else _rel(root, real)
            for lineno, line in enumerate(data.splitlines(), start=1):
                if search(line):
                    if len(hits) >= max_results:
                        truncated = True
                        break
                    text = line.decode("utf-8", errors="replace")
                    shown = text if len(text) <= SEARCH_LINE_CHARS else text[:SEARCH_LINE_CHARS] + "…"
                    hits.append(f"{rel}:{lineno}: {shown}")
            if truncated:
                break
        if skipped:
            more = f" and {len(skipped) - 20} more" if len(skipped) > 20 else ""
            note += f"[skipped: {', '.join(skipped[:20])}{more}]\n"
        if not hits:
            return note + f"no matches for {pattern!r} in {scanned} files"
        tail = f"\n[stopped at {max_results} matches; narrow the pattern or path]" if truncated else ""
        return note + "\n".join(hits) + tail

    return search_text


def _make_write_file(root: Path, allow_write: bool):
    def write_file(inp: dict) -> str:
        if not allow_write:
            raise ToolRefused("write_file is disabled: start with --allow-write")
        full = resolve_in_root(root, inp.get("path"))
        path: str = inp["path"]  # (a non-empty string: resolve_in_root checked)
        content = inp.get("content")
        if not isinstance(content, str):
            raise ToolRefused("'content' must be a string")
        st = _refuse_special(full, path)
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise ToolRefused(f"'{path}' is a directory")
        try:
            full.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ToolRefused(f"cannot create the directory of '{path}': {e.strerror or type(e).__name__}") from None
        data = content.encode("utf-8")
        with _open_regular(full, path, os.O_WRONLY | os.O_CREAT, "wb") as f:
            f.truncate(0)  # (after the check: O_TRUNC would act before it)
            f.write(data)
        return f"wrote {len(data)} bytes to {_rel(root, full)}"

    return write_file


async def sleep_tool(inp: dict) -> str:
    seconds = inp.get("seconds", 1)
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
        raise ToolRefused(f"'seconds' must be a number >= 0, got {seconds!r}")
    seconds = min(float(seconds), SLEEP_MAX_SECONDS)
    await asyncio.sleep(seconds)
    return f"slept {seconds:g} s"


def builtin_tools(root: Path, *, allow_write: bool = False) -> dict[str, ToolSpec]:
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
            fn=_make_read_file(root),
            concurrency_safe=True,
            timeout=30,
        ),
        ToolSpec(
            name="list_dir",
            description=(
                "List a directory of the workspace: one entry per line, directories end with '/', symlinks with '@', "
                f"files show their size. At most {LIST_MAX_ENTRIES} entries. `path` defaults to the workspace root."
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
            fn=_make_list_dir(root),
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
            fn=_make_search_text(root),
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
