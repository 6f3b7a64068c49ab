"""Parse the date formats our invoices and exports actually contain."""

from __future__ import annotations

import re
from datetime import date

__all__ = ["parse_date"]

# Month names by their first three letters: "jan" -> 1 ... "dec" -> 12.
_MONTHS = {
    name: number
    for number, name in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], start=1
    )
}

_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_DMY = re.compile(r"(\d{1,2})/(\d{1,2})/(\d{4})")
_WORDS = re.compile(r"(\d{1,2})\s+([A-Za-z]+)\.?\s+(\d{4})")


def parse_date(text: str) -> date:
    """Parse "2024-03-05", "05/03/2024" (day first) or "5 Mar 2024" / "5 March 2024".

    Raises ValueError for anything else.
    """
    text = text.strip()

    m = _ISO.match(text)
    if m:
        year, month, day = (int(g) for g in m.groups())
        return date(year, month, day)

    m = _DMY.fullmatch(text)
    if m:
        day, month, year = (int(g) for g in m.groups())
        return date(year, month, day)

    m = _WORDS.fullmatch(text)
    if m:
        day, month_name, year = m.groups()
        month = _MONTHS[month_name.lower()]
        return date(int(year), month, int(day))

    raise ValueError(f"unrecognised date: {text!r}")
