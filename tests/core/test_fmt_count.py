"""`count`: a number and its noun, as every line that counts reads, events or bytes says it."""

from __future__ import annotations

from inspector.core.fmt import count
from inspector.net.proxy import ProxyExchange, format_exchange


def test_one_is_singular_and_any_other_number_plural() -> None:
    assert [count(n, "read") for n in (0, 1, 2, 1000)] == ["0 reads", "1 read", "2 reads", "1000 reads"]


def test_the_proxys_exchange_line_says_1_read() -> None:
    ex = ProxyExchange("POST", "/v1/messages", t_request=0.0)
    ex.status, ex.end, ex.reads, ex.bytes = 200, "complete", 1, 734
    line = format_exchange(ex)
    assert "1 read, 734 bytes" in line and "1 reads" not in line
