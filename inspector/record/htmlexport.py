"""``inspector export REC -o session.html``: one self-contained HTML page of a session that opens in any browser,
offline, with no external request: the turns, every event with its raw bytes and read boundaries, the block
buffers with fragment boundaries, the tools with their states, the timeline, the timing verdict, usage and cost,
the cache verdicts, the diagnostics and the request diff between turns. A time slider shows the state as of any
event, as the dashboard's time travel does.

It is built from the recording (already redacted when it was written) through the same engine as ``dump``, and
every string is masked again with the secrets given (the dashboard passes its session's key) and the credential
header rule: a key never reaches the page. The page's data is one JSON document inside the page; the page's script
folds it on the client.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from inspector.core import exactjson
from inspector.core.redaction import PROCESS_SECRETS, is_credential, mask_text, redact
from inspector.observe.stepobs import event_name, summarize_event
from inspector.record.accounting import account, requests_of
from inspector.record.cachebreak import first_difference
from inspector.record.dump import Dumper, conversations_of
from inspector.record.recording import RecordedAttempt, Recording
from inspector.stream import diagnostics as D
from inspector.stream.assembler import Step, TurnStream
from inspector.stream.family import FamilyStream

MAX_MESSAGE_CHARS = 4000  # a message shown in the request diff is cut past this (the recording has it whole)


def _text(data: bytes) -> tuple[str, bool]:
    """Bytes as text for the page: UTF-8 as is, otherwise base64 (flagged)."""
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), True


def _headers(h: Any) -> dict[str, Any]:
    if not isinstance(h, dict):
        return {}
    return {k: ("[redacted]" if is_credential(k, v) else v) for k, v in h.items()}


def _cut(value: Any) -> Any:
    text = exactjson.dumps(value, default=str).decode()
    return value if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS] + f"... ({len(text)} chars)"


# 16 digits in a row: an integer a browser's JSON.parse may round (2**53 has 16 digits; a string's digits match too,
# and then the exact text is carried for nothing, which is harmless)
_LONG_DIGITS = re.compile(rb"[0-9]{16}")


def _exact_text(value: Any, option: int = 0) -> str | None:
    """A tool input's JSON text when it holds an integer a browser cannot keep (beyond 2**53: JSON.parse rounds it to
    a float); the page shows this text instead of re-serializing its rounded value. None otherwise."""
    try:
        raw = exactjson.dumps(value, option=option)
    except orjson.JSONEncodeError:
        return None
    return raw.decode() if _LONG_DIGITS.search(raw) else None


def _history(body: dict[str, Any]) -> list[Any]:
    """The history a request sent: ``messages`` (Messages, Chat Completions) or a Responses request's ``input``
    (its items; a string is one user input)."""
    h = body.get("messages") if "messages" in body else body.get("input")
    if isinstance(h, str):
        return [h]
    return h if isinstance(h, list) else []


def _request_diff(prev: Any, cur: Any) -> dict[str, Any]:
    """What changed from the previous turn's request: the first difference in cache order, parameters that
    changed, and the messages (a Responses request: its ``input`` items) appended (cut for the page)."""
    out: dict[str, Any] = {}
    if not isinstance(cur, dict):
        return {"note": "request body not kept"}
    if not isinstance(prev, dict):
        out["messages_added"] = [_cut(m) for m in _history(cur)][:50]
        return out
    pm, cm = _history(prev), _history(cur)
    if isinstance(cur.get("previous_response_id"), str):
        # (a Responses request that continues a stored response sends only what it adds: every item is new, none of
        # the previous request's was edited or removed)
        pm = []
    found = first_difference(prev, cur, len(pm))
    if found is not None:
        out["first_difference"] = found.reason
    history = "messages" if "messages" in cur or "messages" in prev else "input"
    params = sorted(
        k for k in set(prev) | set(cur) if k not in (history, "system", "tools") and prev.get(k) != cur.get(k)
    )
    if params:
        out["params_changed"] = {k: [prev.get(k), cur.get(k)] for k in params}
    if len(cm) >= len(pm):
        out["messages_added"] = [_cut(m) for m in cm[len(pm) :]][:50]
    else:
        out["messages_removed"] = len(pm) - len(cm)
    return out


class _Builder:
    def __init__(self, recording: Recording, secrets: list[str]) -> None:
        self.rec = recording
        self.secrets = secrets
        self.attempts: list[dict[str, Any]] = []
        self.events: list[list[Any]] = []
        self.blocks: list[dict[str, Any]] = []
        self.diags: list[dict[str, Any]] = []
        self.raws: dict[int, bytes] = {}  # attempt -> its whole body (while it is being decoded)

    def attempt(self, att: RecordedAttempt) -> None:
        a_idx = len(self.attempts)
        req = att.request or {}
        t0 = float(req["t"]) if isinstance(req.get("t"), int | float) else 0.0
        resp = att.response or {}
        end = att.end or {}
        reads = list(att.reads)
        self.raws = {a_idx: b"".join(r.data for r in reads)}
        bounds: list[int] = []  # stream offset where each read starts
        offset = 0
        for r in reads:
            bounds.append(offset)
            offset += len(r.data)
        self.attempts.append(
            {
                "turn": att.turn,
                "attempt": att.attempt,
                "t0": t0,
                "method": req.get("method"),
                "url": req.get("url"),
                "headers": _headers(req.get("headers")),
                "status": resp.get("status"),
                "response_headers": _headers(resp.get("headers")),
                "end": end.get("status"),
                "reason": end.get("reason"),
                "t_end": t0 + float(end["t"]) if isinstance(end.get("t"), int | float) else None,
                "reads": [[t0 + (r.t or 0.0), bounds[i], len(r.data)] for i, r in enumerate(reads)],
            }
        )
        status = resp.get("status")
        if isinstance(status, int) and not 200 <= status < 300:
            body, b64 = _text(b"".join(r.data for r in reads))
            self.attempts[-1]["body"] = body[:20000]
            self.attempts[-1]["body_b64"] = b64
            return
        # the body's family as dump and the dashboard tell it: the request path, then the first event
        url = req.get("url")
        fs = FamilyStream(url if isinstance(url, str) else None)
        open_blocks: dict[int, int] = {}  # block index -> position in self.blocks
        prev: object = None  # the last step's SSE event (an OpenAI event can give several steps: one row)
        t = t0
        for r in reads:
            t = t0 + (r.t or 0.0)
            for step in fs.feed(r.data):
                prev = self._step(a_idx, t, step, fs.stream, open_blocks, prev)
        for step in fs.decide():  # (a body too short to tell its family: held until now)
            prev = self._step(a_idx, t, step, fs.stream, open_blocks, prev)
        assert fs.stream is not None
        for d in fs.stream.close():
            self.diags.append({"a": a_idx, "ev": None, "code": d.code, "severity": d.severity, "message": d.message})

    def _step(
        self, a_idx: int, t: float, step: Step, ts: TurnStream | None, open_blocks: dict[int, int], prev: object
    ) -> object:
        """One step: its event's row (once per SSE event), its diagnostics and what it changed; returns its event."""
        assert ts is not None
        sse = step.sse
        et = step.event.type
        if sse is not prev:
            index, summary = summarize_event(step.event)
            raw = self.rec_raw(a_idx, sse.start, sse.end)
            bad = 1 if et in ("error", "invalid", "unknown") else 0
            name = event_name(sse.event, et)
            self.events.append([a_idx, round(t, 6), name, index, summary, raw, sse.start, sse.read_index, bad])
        ev_idx = len(self.events) - 1
        for d in step.diagnostics:
            self.diags.append(
                {
                    "a": a_idx,
                    "ev": ev_idx,
                    "code": d.code,
                    "severity": d.severity,
                    "message": d.message,
                    "block": d.block_index,
                }
            )
        asm = ts.assembler
        for change in step.changes:
            kind = change[0]
            if kind == "block_opened":
                b = asm.blocks[change[1]]
                open_blocks[b.index] = len(self.blocks)
                self.blocks.append(
                    {
                        "a": a_idx,
                        "index": b.index,
                        "type": b.type,
                        "id": b.id,
                        "name": b.name,
                        "open": ev_idx,
                        "frags": [],
                    }
                )
            elif kind == "block_delta":
                pos = open_blocks.get(change[1])
                delta = getattr(step.event, "delta", None)
                frag = (
                    getattr(delta, "text", None)
                    or getattr(delta, "partial_json", None)
                    or getattr(delta, "thinking", None)
                    or ""
                )
                if pos is not None and frag:
                    self.blocks[pos]["frags"].append([ev_idx, frag])
            elif kind == "block_closed":
                pos = open_blocks.pop(change[1], None)
                if pos is not None:
                    b = asm.blocks[change[1]]
                    self.blocks[pos]["closed"] = ev_idx
                    self.blocks[pos]["content"] = content = b.to_content()
                    exact = (
                        _exact_text(content.get("input"), orjson.OPT_INDENT_2) if isinstance(content, dict) else None
                    )
                    if exact is not None:
                        self.blocks[pos]["input_text"] = exact
                    if b.input_error:
                        self.blocks[pos]["error"] = b.input_error.describe()
        return sse

    def rec_raw(self, a_idx: int, start: int, end: int) -> str:
        """An event's bytes, as text (bytes that are not UTF-8 as backslash escapes)."""
        return self.raws[a_idx][start:end].decode("utf-8", errors="backslashreplace")


def build(recording: Recording, *, secrets: list[str] | None = None, title: str = "session") -> dict[str, Any]:
    """The page's data document (plain JSON)."""
    secrets = [s for s in (secrets or []) if s]
    b = _Builder(recording, secrets)
    for att in recording.attempts():
        b.attempt(att)
    b.raws = {}
    dumper = Dumper()
    for att in recording.attempts():
        for read in att.reads:
            dumper.feed(att, read)
    turns = dumper.turns(recording)
    _transport_diagnostics(b, turns)
    conversations_of(recording, turns)  # (a proxy recording's turns name their conversation, as in dump)
    reqs = requests_of(recording.turns)
    totals = account(turns, reqs)
    prev: dict[Any, Any] = {}  # each turn's request against the previous one of its own conversation
    for i, t in enumerate(turns):
        r = reqs[i] if i < len(reqs) else None
        body = r.body if r else None
        conversation = t.get("conversation")
        t["request_diff"] = _request_diff(prev.get(conversation), body)
        prev[conversation] = body
    try:
        from inspector.record.timing import timing_json

        timing = timing_json(recording)
    except Exception as e:  # noqa: BLE001 (a timing analysis that fails still leaves a page: say so)
        timing = {"error": f"{type(e).__name__}"}
    tools = _tools(recording, turns)
    doc = {
        "meta": {
            "title": title,
            "format": "stream-inspector-html",
            "source": recording.header.get("source"),
            "started_at": recording.header.get("started_at"),
            "tool_version": recording.header.get("tool_version"),
            "price_source": totals.get("price_source"),
        },
        "attempts": b.attempts,
        "events": b.events,
        "blocks": b.blocks,
        "diagnostics": b.diags,
        "tools": tools,
        "turns": turns,
        "total": totals,
        "timing": timing,
        "warnings": recording.warnings,
    }
    if secrets:
        doc = redact(doc, secrets)
    return doc


def _tools(recording: Recording, turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool calls with their state history, from the recorded observations (the loop's, or the proxy's inferred
    ones). A call is its turn's, attempt's and id's: tool ids of different conversations may be equal (a mock
    upstream seeds them by turn; a retry may repeat them), so keyed by id alone two calls became one row, their
    states interleaved, under the first one's turn. Each names its conversation (as the Turns pane does) and whether
    its times were inferred from the next request rather than measured."""
    where = {t.get("turn"): (t.get("conversation"), t.get("conversation_turn")) for t in turns}
    calls: dict[tuple[Any, Any, str], dict[str, Any]] = {}
    for o in recording.observations:
        if not isinstance(o, dict) or o.get("type") != "tool_state" or not isinstance(o.get("id"), str):
            continue
        turn, attempt = _index(o.get("turn")), _index(o.get("attempt"))  # (what the page counts from: integers)
        key = (turn, attempt, o["id"])
        c = calls.get(key)
        if c is None:
            conversation, conversation_turn = where.get(turn, (None, None))
            c = calls[key] = {
                "id": o["id"],
                "name": o.get("name"),
                "turn": turn,
                "attempt": attempt,
                "conversation": conversation,
                "conversation_turn": conversation_turn,
                "inferred": False,
                "states": [],
                "input": None,
            }
        t = o.get("t") if isinstance(o.get("t"), int | float) else None
        c["states"].append([t, o.get("state")])
        if o.get("inferred") is True:
            c["inferred"] = True
        if o.get("input") is not None:
            c["input"] = o.get("input")
            exact = _exact_text(c["input"])
            if exact is not None:
                c["input_text"] = exact
        for k in ("error", "result_preview"):
            if o.get(k) is not None:
                c[k] = o.get(k)
    return list(calls.values())


_TRANSPORT = (D.HTTP_ERROR, D.NO_RESPONSE, D.CONNECTION_DROPPED, D.IDLE_TIMEOUT)


def _transport_diagnostics(b: _Builder, turns: list[dict[str, Any]]) -> None:
    """The diagnostics dump gives an attempt for its transport (an HTTP error status; no response at all, whose
    "no events" is then not said), on the page too: its Diagnostics pane and summary said "no diagnostics" for
    six 429s, and "the stream carried no event" for a request the client cancelled before any headers."""
    where = {(a["turn"], a["attempt"]): i for i, a in enumerate(b.attempts)}
    for entry in [x for t in turns for x in (*t.get("failed_attempts", ()), t)]:
        a_idx = where.get((entry.get("turn"), entry.get("attempt")))
        found = [d for d in entry.get("diagnostics", ()) if d.get("code") in _TRANSPORT]
        if a_idx is None or not found:
            continue
        if any(d["code"] == D.NO_RESPONSE for d in found):
            b.diags[:] = [d for d in b.diags if not (d["a"] == a_idx and d["code"] == D.NO_EVENTS)]
        for d in found:
            b.diags.append(
                {"a": a_idx, "ev": None, "code": d["code"], "severity": d["severity"], "message": d["message"]}
            )


def _index(value: Any) -> int | None:
    """A turn or attempt number as the page uses it (``n + 1``): an integer >= 0, else None (a recording's ``obs``
    line is not checked field by field: a string there was put into the page as markup)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def render(doc: dict[str, Any]) -> str:
    """The page: the template with the data document inlined (every ``<`` as ``\\u003c``, so that no string can end
    the script or open an HTML comment in it). Its policy lets run only the page's own script, by its digest
    (``script-src 'sha256-...'``): markup that a hostile recording got into the page cannot run (an ``onerror``
    attribute, an injected ``<script>``), whatever an escaping slip."""
    template = resources.files("inspector.record").joinpath("export_page.html").read_text("utf-8")
    script = _SCRIPT.search(template)
    assert script is not None  # (the template's one script)
    digest = base64.b64encode(hashlib.sha256(script.group(1).encode("utf-8")).digest()).decode()
    data = exactjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS, default=str).decode()
    data = data.replace("<", "\\u003c")  # (a `<` is only ever inside a JSON string: no `</script>`, no `<!--`)
    title = html.escape(str(doc["meta"].get("title") or "session"))
    page = template.replace("{{SCRIPT_HASH}}", f"sha256-{digest}").replace("{{TITLE}}", title)
    return page.replace("{{DATA}}", data)  # (last: the data may hold any text, even "{{TITLE}}")


def export(recording: Recording, out: str | Path, *, secrets: list[str] | None = None, title: str = "session") -> int:
    """Writes the page; returns its size in bytes. ``secrets`` and the keys the process knows (``learn``: the CLI
    learns the credential environment variables) are masked in it."""
    secrets = [*(secrets or []), *PROCESS_SECRETS.secrets]
    page = render(build(recording, secrets=secrets, title=title))
    if secrets:
        page = mask_text(page, secrets)
    data = page.encode("utf-8")
    Path(out).write_bytes(data)
    return len(data)
