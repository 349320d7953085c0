"""When to try a URL again, and how long to wait first. Pure: no clock, no trio.

Rules:

1. Only transient failures are retried: the statuses in ``RETRY_STATUSES``
   (429, 502, 503, 504; a 500 usually means a bug on the page, which a second
   request reproduces) and the network failure kinds in ``RETRY_ERROR_KINDS``
   (timeout, connect, reset, protocol, and render: a browser that crashed or
   hung). ``too_large``, ``decode`` and every
   other final answer are not: asking again gets the same answer.
2. A URL gets at most ``RetryPolicy.retries`` retries, so at most
   ``retries + 1`` requests. Retries are numbered from 1.
3. Backoff is exponential with "equal jitter": retry ``n`` waits a uniform
   random time in ``[e/2, e]`` where ``e = min(backoff_cap, backoff_base *
   2 ** (n - 1))``. Half of the wait is fixed so a retry never fires at once
   and its wait still grows with ``n``; the random half spreads out the
   retries of many URLs that failed together (a site restarting).
4. A valid ``Retry-After`` (delta-seconds, or an HTTP-date compared with the
   injected ``now_epoch``) is a floor: we wait at least that long, but never
   more than ``max_retry_after`` because of it. The backoff still applies when
   it is longer. An invalid or past ``Retry-After`` is ignored.

Randomness comes from the caller's ``random.Random`` and time from the caller's
``now_epoch``, so every delay is reproducible in tests.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass

#: HTTP statuses worth asking again (rule 1).
RETRY_STATUSES: frozenset[int] = frozenset({429, 502, 503, 504})
#: ``FetchError.kind`` values worth asking again (rule 1).
RETRY_ERROR_KINDS: frozenset[str] = frozenset(
    {"timeout", "connect", "reset", "protocol", "render"}
)

_DELTA_SECONDS = re.compile(r"[0-9]+")
#: The most seconds a delta-seconds ``Retry-After`` means (rule 4's cap is far lower).
_MAX_DELTA = 1e9
_MAX_DELTA_DIGITS = 10  # fewer digits than this are below _MAX_DELTA or equal to it
# 2.0 ** 1023 is the largest power of two a float holds; beyond it the cap applies anyway.
_MAX_EXPONENT = 1023


def should_retry_status(status: int) -> bool:
    """True for an HTTP status that a later request may well not get (rule 1)."""
    return status in RETRY_STATUSES


def should_retry_error(kind: str) -> bool:
    """True for a ``FetchError.kind`` that a later request may well not get (rule 1)."""
    return kind in RETRY_ERROR_KINDS


def parse_retry_after(value: str | None, now_epoch: float) -> float | None:
    """Seconds to wait according to a ``Retry-After`` header, or None if unusable.

    Accepts delta-seconds (digits only, RFC 9110 section 10.2.3) and HTTP-dates;
    a date without a zone is read as UTC. A date in the past gives 0.0.
    """
    if value is None:
        return None
    value = value.strip()
    if _DELTA_SECONDS.fullmatch(value):
        # Any cap applied later is far lower than 10**9 s. Capped by its digit
        # count before int() sees it: a header of 4,301 digits is Python's
        # "Exceeds the limit for integer string conversion" ValueError, and a
        # header value must never stop a crawl.
        digits = value.lstrip("0")
        return float(int(digits or "0")) if len(digits) < _MAX_DELTA_DIGITS else _MAX_DELTA
    # Here, not at the top: email.utils and datetime cost every crawl ~2 ms of
    # start-up, and most never see a Retry-After date.
    from datetime import UTC
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        return max(0.0, when.replace(tzinfo=UTC).timestamp() - now_epoch)
    return max(0.0, when.timestamp() - now_epoch)


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How many times to retry and how long to wait (see the module rules).

    Example::

        policy = RetryPolicy(retries=3, backoff_base=1.0)
        policy.delay(1, rng, None, now)   # in [0.5, 1.0]
        policy.delay(3, rng, "120", now)  # 60.0: Retry-After, capped by max_retry_after

    Raises ``ValueError`` on construction for negative or non-finite values,
    or a ``backoff_cap`` below ``backoff_base``.
    """

    retries: int = 2
    backoff_base: float = 0.5
    backoff_cap: float = 30.0
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        if isinstance(self.retries, bool) or not isinstance(self.retries, int):
            raise TypeError(f"retries must be an int, not {self.retries!r}")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, not {self.retries}")
        for name in ("backoff_base", "backoff_cap", "max_retry_after"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, not {value!r}")
        if self.backoff_base <= 0:
            raise ValueError(f"backoff_base must be > 0, not {self.backoff_base!r}")
        if self.backoff_cap < self.backoff_base:
            raise ValueError(
                f"backoff_cap ({self.backoff_cap!r}) must be >= backoff_base "
                f"({self.backoff_base!r})"
            )

    def should_retry_status(self, status: int) -> bool:
        """``should_retry_status`` (module function), here for callers holding a policy."""
        return should_retry_status(status)

    def should_retry_error(self, kind: str) -> bool:
        """``should_retry_error`` (module function), here for callers holding a policy."""
        return should_retry_error(kind)

    def backoff_ceiling(self, attempt: int) -> float:
        """``e`` of rule 3: the longest backoff for retry number ``attempt``."""
        _check_attempt(attempt)
        exponent = min(attempt - 1, _MAX_EXPONENT)
        return min(self.backoff_cap, self.backoff_base * 2.0**exponent)

    def delay(
        self,
        attempt: int,
        rng: random.Random,
        retry_after: str | None,
        now_epoch: float,
    ) -> float:
        """Seconds to wait before retry number ``attempt`` (1 for the first retry).

        ``retry_after`` is the raw ``Retry-After`` header of the failed answer
        (None if absent); ``now_epoch`` is the current Unix time, used only to
        read an HTTP-date. Always draws exactly one number from ``rng``.
        """
        ceiling = self.backoff_ceiling(attempt)
        backoff = ceiling / 2 + rng.uniform(0.0, ceiling / 2)
        asked = parse_retry_after(retry_after, now_epoch)
        if asked is None:
            return backoff
        return max(backoff, min(asked, self.max_retry_after))

    def next_delay(
        self,
        attempt: int,
        *,
        status: int | None = None,
        error_kind: str | None = None,
        retry_after: str | None = None,
        rng: random.Random,
        now_epoch: float,
    ) -> float | None:
        """Whether to make retry ``attempt`` after a failure, and after how long.

        Give exactly one of ``status`` (an HTTP answer) or ``error_kind`` (a
        ``FetchError.kind``). Returns the delay in seconds, or None when the
        failure is final (not transient, or the retries are used up).
        """
        if (status is None) == (error_kind is None):
            raise TypeError("give exactly one of status and error_kind")
        _check_attempt(attempt)
        if attempt > self.retries:
            return None
        if status is not None and not should_retry_status(status):
            return None
        if error_kind is not None and not should_retry_error(error_kind):
            return None
        return self.delay(attempt, rng, retry_after, now_epoch)


def _check_attempt(attempt: int) -> None:
    if attempt < 1:
        raise ValueError(f"attempt counts retries from 1, not {attempt}")
