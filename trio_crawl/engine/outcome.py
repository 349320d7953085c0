"""What one fetch attempt means for its URL: the engine's decision table.

Pure, like h11's state machine: a result or an error goes in, one of four
next steps comes out, and the engine does the I/O. No trio, no clock (the
wall-clock time for ``Retry-After`` dates and the random source are passed
in), so every branch is tested directly.

    failure, retryable, attempts left  -> RETRY (after ``delay``)
    status 429/502/503/504, attempts left -> RETRY
    a render that may do better, attempts left -> RETRY (the page as served otherwise)
    failure                            -> RECORD with the failure's kind
    status 301/302/303/307/308         -> REDIRECT
    status 429 / 5xx / 4xx             -> RECORD with http_429 / http_5xx / http_4xx
    a rendered page's client redirect  -> REDIRECT
    anything else                      -> PAGE (read it: links or a handler)

A stopping crawl never retries: what has failed is recorded as it is.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass
from typing import Any

from ..core.digest import sha1_digest
from ..core.frontier import Entry
from ..core.models import HOST_FAILURE_KINDS, CrawlRecord, ErrorInfo, FetchResult
from ..core.retry import RetryPolicy
from ..core.url import mask_credentials
from ..errors import FetchError

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


class Step(enum.Enum):
    RETRY = "retry"
    RECORD = "record"
    REDIRECT = "redirect"
    PAGE = "page"


@dataclass(frozen=True, slots=True)
class Outcome:
    """The next step; ``error`` is ``(kind, message)`` for a RECORD that
    failed, ``delay`` the seconds to wait for a RETRY."""

    step: Step
    error: tuple[str, str] | None = None
    delay: float = 0.0


def http_error(status: int) -> tuple[str, str] | None:
    """The error kind of a final HTTP status (None for a success)."""
    if status == 429:
        return ("http_429", "HTTP 429")
    if status >= 500:
        return ("http_5xx", f"HTTP {status}")
    if status >= 400:
        return ("http_4xx", f"HTTP {status}")
    return None


def decide(
    *,
    attempts: int,
    result: FetchResult | None,
    failure: FetchError | None,
    policy: RetryPolicy,
    stopping: bool,
    rng: random.Random,
    now_epoch: float,
) -> Outcome:
    """Decide what attempt number ``attempts`` (1 for the first) leads to.

    Exactly one of ``result`` and ``failure`` is given. A URL is requested at
    most ``policy.retries + 1`` times: attempt ``n`` is retried only while
    ``n <= retries``.
    """
    if (result is None) == (failure is None):
        raise ValueError("give exactly one of result and failure")
    if not stopping and attempts <= policy.retries:
        if failure is not None:
            retry = policy.should_retry_error(failure.kind)
        else:
            assert result is not None
            retry = policy.should_retry_status(result.status) or _render_again(result, policy)
        if retry:
            retry_after = result.headers.get("retry-after") if result is not None else None
            return Outcome(Step.RETRY, delay=policy.delay(attempts, rng, retry_after, now_epoch))
    if failure is not None:
        return Outcome(Step.RECORD, error=(failure.kind, failure.message))
    assert result is not None
    if result.status in REDIRECT_STATUSES:
        return Outcome(Step.REDIRECT)
    error = http_error(result.status)
    if error is not None:
        return Outcome(Step.RECORD, error=error)
    if result.client_redirect is not None:  # --render: location.replace, meta refresh
        return Outcome(Step.REDIRECT)
    return Outcome(Step.PAGE)


def _render_again(result: FetchResult, policy: RetryPolicy) -> bool:
    """A render that failed for a reason another attempt may not meet (a
    crashed tab) is tried again, as a network error would be."""
    failure = result.render_failure
    return failure is not None and failure.retry and policy.should_retry_error("render")


def _payload(result: FetchResult) -> bytes:
    """What came over the network (a rendered page's DOM is not its size)."""
    return result.body if result.network_body is None else result.network_body


def payload_digest(result: FetchResult) -> str:
    """The record's ``digest`` of ``result``: the WARC-Payload-Digest of what
    came over the network (a recrawl's archive compares it with the last)."""
    return sha1_digest(_payload(result))


def make_record(
    entry: Entry,
    error: tuple[str, str] | None,
    result: FetchResult | None = None,
    elapsed_ms: float | None = None,
    *,
    redirect: str | None = None,
    links: int = 0,
    tb: str | None = None,
    t: float | None = None,
) -> CrawlRecord:
    """The record of ``entry``'s last attempt: its response (if any), the
    error ``(kind, message)`` (if any), what was followed from it, and ``t``,
    when it was written (seconds since the crawl started). A URL's userinfo
    in the error message (a raw ``Location``, say) is masked. ``attempts``
    is the entry's count of its requests, with one rule for a URL that made
    none: a record whose kind is one of ``HOST_FAILURE_KINDS`` comes from the
    robots.txt request the URL waited for (its host could not be talked to),
    and that one request, made on its behalf, counts; any other such record
    (``robots``, a budget) says 0."""
    extra: dict[str, Any] = {}
    if result is not None and result.rendered:
        extra["rendered"] = True
    if result is not None and result.render_failure is not None:
        extra["render_error"] = result.render_failure.to_json()
    if result is not None and not result.body_skipped and result.status != 304:
        # The WARC's WARC-Payload-Digest of this body: two crawls compare by it.
        extra["digest"] = payload_digest(result)
    return CrawlRecord(
        extra=extra,
        url=entry.url,
        status=None if result is None else result.status,
        depth=entry.depth,
        error=None if error is None else ErrorInfo(error[0], mask_credentials(error[1]), tb),
        redirect=redirect,
        referrer=entry.referrer,
        content_type=None if result is None else result.content_type,
        elapsed_ms=elapsed_ms,
        links=links,
        attempts=entry.attempts or int(error is not None and error[0] in HOST_FAILURE_KINDS),
        t=t,
        protocol=None if result is None else result.http_version,
        size=None if result is None or result.body_skipped else len(_payload(result)),
    )
