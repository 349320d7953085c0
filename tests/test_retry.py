"""Retry decisions and backoff delays (``_retry``): pure, seeded, exact."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_crawl.core.models import ERROR_KINDS
from trio_crawl.core.retry import (
    RETRY_ERROR_KINDS,
    RetryPolicy,
    parse_retry_after,
    should_retry_error,
    should_retry_status,
)

NOW = 1_700_000_000.0  # 2023-11-14T22:13:20Z


def test_retryable_statuses() -> None:
    assert [s for s in range(100, 600) if should_retry_status(s)] == [429, 502, 503, 504]


def test_policy_methods_delegate() -> None:
    policy = RetryPolicy()
    assert policy.should_retry_status(503) and not policy.should_retry_status(500)
    assert policy.should_retry_error("reset") and not policy.should_retry_error("decode")


def test_retryable_error_kinds() -> None:
    assert RETRY_ERROR_KINDS <= ERROR_KINDS
    assert sorted(k for k in ERROR_KINDS if should_retry_error(k)) == [
        "connect",
        "protocol",
        "render",
        "reset",
        "timeout",
    ]


def test_defaults() -> None:
    assert RetryPolicy() == RetryPolicy(
        retries=2, backoff_base=0.5, backoff_cap=30.0, max_retry_after=60.0
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"retries": -1}, r"^retries must be >= 0, not -1$"),
        ({"backoff_base": 0.0}, r"^backoff_base must be > 0, not 0\.0$"),
        ({"backoff_base": float("nan")}, r"^backoff_base must be a finite number >= 0, not nan$"),
        ({"backoff_cap": float("inf")}, r"^backoff_cap must be a finite number >= 0, not inf$"),
        ({"max_retry_after": -1.0}, r"^max_retry_after must be a finite number >= 0, not -1\.0$"),
        ({"backoff_base": 2.0, "backoff_cap": 1.0}, r"^backoff_cap \(1\.0\) must be >= "),
    ],
)
def test_validation(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_retries_must_be_an_int() -> None:
    with pytest.raises(TypeError, match=r"^retries must be an int, not 1\.5$"):
        RetryPolicy(retries=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^retries must be an int, not True$"):
        RetryPolicy(retries=True)


def test_exact_delays_with_seeded_random() -> None:
    rng = random.Random(42)
    delays = [RetryPolicy().delay(a, rng, None, NOW) for a in range(1, 9)]
    # ceilings 0.5, 1, 2, 4, 8, 16, 30 (cap), 30; each delay is ceiling/2 * (1 + u)
    assert delays == [
        0.4098566996144709,
        0.5125053776113335,
        1.2750293183691193,
        2.4464214762976457,
        6.94588485665605,
        13.41359589938329,
        28.382693515572683,
        16.304082489441242,
    ]


def test_backoff_ceiling() -> None:
    policy = RetryPolicy(backoff_base=1.0, backoff_cap=10.0)
    assert [policy.backoff_ceiling(a) for a in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert policy.backoff_ceiling(10**6) == 10.0  # no overflow
    with pytest.raises(ValueError, match=r"^attempt counts retries from 1, not 0$"):
        policy.backoff_ceiling(0)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("0", 0.0),
        ("7", 7.0),
        (" 120 ", 120.0),
        ("99999999999999999999999", 1e9),
        ("Tue, 14 Nov 2023 22:13:50 GMT", 30.0),
        ("Tue, 14 Nov 2023 22:13:50 -0000", 30.0),  # no zone: read as UTC
        ("Tue, 14 Nov 2023 23:13:50 +0100", 30.0),
        ("Tue, 14 Nov 2023 22:00:00 GMT", 0.0),  # in the past
        (None, None),
        ("", None),
        ("-5", None),
        ("1.5", None),
        ("soon", None),
        ("Tue, 32 Nov 2023 22:13:50 GMT", None),
    ],
)
def test_parse_retry_after(header: str | None, expected: float | None) -> None:
    assert parse_retry_after(header, NOW) == expected


def test_retry_after_is_a_floor_capped_by_max_retry_after() -> None:
    policy = RetryPolicy(backoff_base=1.0, backoff_cap=8.0, max_retry_after=60.0)
    rng = random.Random(0)
    assert policy.delay(1, rng, "20", NOW) == 20.0
    assert policy.delay(1, rng, "3600", NOW) == 60.0
    date = format_datetime(datetime.fromtimestamp(NOW + 45, UTC), usegmt=True)
    assert policy.delay(1, rng, date, NOW) == 45.0
    # A short Retry-After does not shorten the backoff.
    long = policy.delay(4, random.Random(1), "1", NOW)
    assert long == policy.delay(4, random.Random(1), None, NOW)
    assert 4.0 <= long <= 8.0
    # Garbage is ignored: plain backoff, same random draw.
    assert policy.delay(2, random.Random(3), "later", NOW) == policy.delay(
        2, random.Random(3), None, NOW
    )


def test_next_delay_decides() -> None:
    policy = RetryPolicy(retries=2)
    rng = random.Random(5)
    assert policy.next_delay(1, status=503, rng=rng, now_epoch=NOW) is not None
    assert policy.next_delay(2, error_kind="reset", rng=rng, now_epoch=NOW) is not None
    assert policy.next_delay(3, status=503, rng=rng, now_epoch=NOW) is None  # used up
    assert policy.next_delay(1, status=500, rng=rng, now_epoch=NOW) is None
    assert policy.next_delay(1, status=404, rng=rng, now_epoch=NOW) is None
    assert policy.next_delay(1, error_kind="too_large", rng=rng, now_epoch=NOW) is None
    assert policy.next_delay(1, status=429, retry_after="9", rng=rng, now_epoch=NOW) == 9.0
    assert RetryPolicy(retries=0).next_delay(1, status=503, rng=rng, now_epoch=NOW) is None
    with pytest.raises(TypeError, match=r"^give exactly one of status and error_kind$"):
        policy.next_delay(1, rng=rng, now_epoch=NOW)
    with pytest.raises(TypeError, match=r"^give exactly one of status and error_kind$"):
        policy.next_delay(1, status=503, error_kind="reset", rng=rng, now_epoch=NOW)


policies = st.builds(
    lambda base, factor, mra: RetryPolicy(
        backoff_base=base, backoff_cap=base * factor, max_retry_after=mra
    ),
    st.floats(min_value=0.001, max_value=100.0),
    st.floats(min_value=1.0, max_value=1000.0),
    st.floats(min_value=0.0, max_value=3600.0),
)


@given(policies, st.integers(min_value=1, max_value=2000), st.integers(0, 2**32))
def test_delay_within_equal_jitter_bounds(policy: RetryPolicy, attempt: int, seed: int) -> None:
    ceiling = policy.backoff_ceiling(attempt)
    delay = policy.delay(attempt, random.Random(seed), None, NOW)
    assert 0 < ceiling / 2 <= delay <= ceiling <= policy.backoff_cap


@given(policies, st.integers(min_value=1, max_value=2000))
def test_ceiling_is_monotone_and_capped(policy: RetryPolicy, attempt: int) -> None:
    assert policy.backoff_ceiling(attempt) <= policy.backoff_ceiling(attempt + 1)
    assert policy.backoff_ceiling(attempt) <= policy.backoff_cap
    assert policy.backoff_ceiling(1) == policy.backoff_base


@given(
    policies,
    st.integers(min_value=1, max_value=50),
    st.integers(0, 2**32),
    st.integers(min_value=0, max_value=10**12),
)
def test_retry_after_bounds(policy: RetryPolicy, attempt: int, seed: int, asked: int) -> None:
    delay = policy.delay(attempt, random.Random(seed), str(asked), NOW)
    plain = policy.delay(attempt, random.Random(seed), None, NOW)
    assert delay >= plain  # never shorter than the backoff
    assert delay >= min(asked, policy.max_retry_after)  # honours Retry-After up to the cap
    assert delay <= max(plain, policy.max_retry_after)  # and no further


@given(st.text(max_size=40))
def test_parse_retry_after_never_raises(header: str) -> None:
    result = parse_retry_after(header, NOW)
    assert result is None or result >= 0.0
