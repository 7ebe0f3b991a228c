"""Timestamps at the edges of `datetime`: always RFC 3339 out, a ValueError (→ 422) in."""

from datetime import datetime, timezone

import pytest

from app.core.timefmt import format_ts, parse_ts


def test_years_before_1000_are_written_with_four_digits():
    assert format_ts(datetime(940, 8, 26, 3, 32, 51, tzinfo=timezone.utc)) == "0940-08-26T03:32:51.000000Z"
    assert format_ts(parse_ts("0001-01-01T00:00:00Z")) == "0001-01-01T00:00:00.000000Z"


@pytest.mark.parametrize("value", ["9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00+01:00", 10**20, -(10**20)])
def test_instants_outside_utc_datetime_are_value_errors(value):
    with pytest.raises(ValueError):
        parse_ts(value)
