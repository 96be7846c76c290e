"""Run and comparison ids: a prefix and a ULID (26 characters of Crockford base32)."""

from __future__ import annotations

import re

import pytest

from oloproof.ids import new_comparison_id, new_run_id, ulid

CROCKFORD = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")


def test_known_values() -> None:
    # The ULID spec's layout: 48 bits of milliseconds, then 80 bits of randomness.
    assert ulid(0, bytes(10)) == "0" * 26
    assert ulid((1 << 48) - 1, b"\xff" * 10) == "7" + "Z" * 25
    assert ulid(1, bytes(10)) == "0000000001" + "0" * 16
    assert ulid(0, bytes(9) + b"\x01") == "0" * 25 + "1"


def test_prefixes_and_alphabet() -> None:
    run, cmp = new_run_id(), new_comparison_id()
    assert run.startswith("run_") and CROCKFORD.match(run[4:])
    assert cmp.startswith("cmp_") and CROCKFORD.match(cmp[4:])
    assert len({new_run_id() for _ in range(1000)}) == 1000


def test_later_milliseconds_sort_later() -> None:
    ids = [ulid(ms) for ms in (1, 2, 1_000, 1_700_000_000_000, 1_700_000_000_001)]
    assert ids == sorted(ids)


def test_out_of_range() -> None:
    with pytest.raises(ValueError):
        ulid(1 << 48)
    with pytest.raises(ValueError):
        ulid(0, b"short")
