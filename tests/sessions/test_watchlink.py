"""`watch --split`'s link to its tmux pane (sessions/watchlink.py): each side learns when the other has ended. The
end-to-end behaviour, in a real tmux, is in tests/cli/test_watch_split.py; here the link itself."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from inspector.sessions.watchlink import PaneLink, WatchEnd, WatchFollower, parse_end


class Session:
    def __init__(self) -> None:
        self.stops: list[str | None] = []
        self.stopped = threading.Event()

    def stop_from_any_thread(self, reason: str | None = None) -> None:
        self.stops.append(reason)
        self.stopped.set()


def _linked() -> tuple[PaneLink, WatchFollower]:
    link = PaneLink()
    follower = WatchFollower(link.path)
    assert link.accept(10)
    return link, follower


def test_once_the_pane_connected_the_sockets_file_and_directory_are_gone() -> None:
    """They were removed by close() only: watch killed left them (in /tmp when the temporary directory's path is too
    long for a socket). The connection needs neither; another dashboard cannot connect any more."""
    link, follower = _linked()
    try:
        assert not os.path.exists(link.dir)
        with socket.socket(socket.AF_UNIX) as s, pytest.raises(OSError):
            s.connect(link.path)
        session = Session()
        follower.attach(session, None)
        link.say_end(0, closes=False)  # (the link itself still works)
        assert session.stopped.wait(10)
    finally:
        link.close()


def test_the_command_ended_the_session_ends_finished_and_the_dashboard_stays() -> None:
    link, follower = _linked()
    session, quits = Session(), threading.Event()
    follower.attach(session, quits.set)
    try:
        link.say_end(3, closes=False)
        assert session.stopped.wait(10)
        assert session.stops == ["the command exited with status 3"]
        assert not quits.is_set()
    finally:
        link.close()


def test_watch_stopped_the_session_ends_and_the_dashboard_closes() -> None:
    link, follower = _linked()
    session, quits = Session(), threading.Event()
    follower.attach(session, quits.set)
    try:
        link.say_end(143, closes=True)
        assert quits.wait(10)
        assert session.stops == ["watching was stopped: the command exited with status 143"]
    finally:
        link.close()


def test_watch_gone_without_a_word_cancels_the_session_and_closes_the_dashboard() -> None:
    link, follower = _linked()
    session, quits = Session(), threading.Event()
    follower.attach(session, quits.set)
    link.close()  # (as its process's end closes it: killed)
    assert quits.wait(10)
    assert session.stops == [None]
    assert not os.path.exists(link.dir)


def test_a_session_attached_after_the_end_is_ended_too() -> None:
    """The end came before the dashboard's session started (or a restart made another one)."""
    link, follower = _linked()
    link.say_end(0, closes=False)
    link.close()
    assert follower.ended.wait(10)
    session = Session()
    follower.attach(session, None)
    assert session.stops == ["the command exited with status 0"]


def test_the_dashboard_gone_is_said_to_watch_and_watch_closing_is_not() -> None:
    link, follower = _linked()
    gone = threading.Event()
    link.on_gone(gone.set)
    follower.sock.shutdown(socket.SHUT_RDWR)  # (the pane quit: its process's end closes it)
    follower.sock.close()
    assert gone.wait(10)
    link.close()

    link, follower = _linked()
    called: list[bool] = []
    link.on_gone(lambda: called.append(True))
    link.close()
    assert follower.ended.wait(10)  # (the follower saw the close: the reader on watch's side did too, said nothing)
    assert called == []


@pytest.mark.parametrize(
    "line",
    [b"", b"garbage", b"[]", b'{"status": "3"}', b'{"status": true}', b'{"status": 300}', b"\xff\xfe"],
)
def test_anything_but_watchs_line_is_watch_gone(line: bytes) -> None:
    assert parse_end(line) == WatchEnd(None, True)


def test_a_temporary_directory_too_long_for_a_socket_falls_back_to_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / ("d" * 120)
    deep.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(deep))
    link = PaneLink()
    try:
        assert link.path.startswith("/tmp/inspector-watch-")
        assert not list(deep.iterdir())  # (the directory tried first is gone)
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(link.path)
    finally:
        link.close()
    assert not os.path.exists(link.dir)


async def test_a_watch_session_stopped_from_another_thread_before_it_runs_ends_when_it_starts() -> None:
    """The link's word can come before the dashboard's session runs: kept, and the session ends as it starts."""
    from inspector.sessions.watch import serve_session

    session = serve_session("weather", None, speed=float("inf"), host="127.0.0.1", port=0)
    stopper = threading.Thread(target=session.stop_from_any_thread, args=("the command exited with status 0",))
    stopper.start()
    stopper.join()
    result = await session.run()
    assert result.status == "finished"
    assert session.stop_reason == "the command exited with status 0"
