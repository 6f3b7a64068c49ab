from datetime import date

import pytest

from src.dates import parse_date


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2024-03-05", date(2024, 3, 5)),
        ("  2024-03-05\n", date(2024, 3, 5)),
        ("05/03/2024", date(2024, 3, 5)),
        ("5/3/2024", date(2024, 3, 5)),
        ("5 Mar 2024", date(2024, 3, 5)),
        ("5 mar. 2024", date(2024, 3, 5)),
        ("31 Dec 1999", date(1999, 12, 31)),
    ],
)
def test_parse_date(text, expected):
    assert parse_date(text) == expected


@pytest.mark.parametrize("text", ["", "yesterday", "2024/03/05", "32/01/2024"])
def test_parse_date_rejects(text):
    with pytest.raises(ValueError):
        parse_date(text)
