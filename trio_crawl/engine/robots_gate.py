"""The trio half of robots.txt: fetch each origin's file once, share it, refresh it.

Theory of operation. ``RobotsCache`` keeps, per robots.txt URL (one per
origin, see ``robots_url`` in ``robots/policy.py``), either a decided policy
with an expiry time or an in-flight fetch marked by a ``trio.Event``. ``policy_for(url)``:

1. returns the cached policy while it is fresh;
2. otherwise, if another task is already fetching that origin's file, waits
   for its event and starts over (callers for *other* origins never wait on
   it: each origin has its own event);
3. otherwise becomes the fetcher: fetches, follows redirects itself with
   ``interpret_robots_response`` deciding each hop, stores the result with its
   expiry (``clock() + ttl``) and sets the event in a ``finally``.

So concurrent callers cause exactly one fetch. If the fetching task is
cancelled (or its fetcher has a bug and raises), the ``finally`` still wakes
the waiters, nothing is stored, and the first waiter to run becomes the next
fetcher: nobody hangs on an event that will never be set.

``FetchError`` counts as "unreachable" (disallow all, refetch after
``retry_period``); one of ``HOST_FAILURE_KINDS`` is also kept as the host's
failure (``host_failure``), so that its pages fail with it at once. Every
other exception from the fetcher is a bug and propagates, as does a fetcher
that skipped the robots.txt body although it was asked for ``any_body=True``
(robots.txt is ``text/plain``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import trio

from ..core.models import HOST_FAILURE_KINDS
from ..errors import FetchError
from ..fetch.base import Fetcher
from ..robots.policy import (
    DEFAULT_MAX_AGE,
    DEFAULT_RETRY_PERIOD,
    MAX_ROBOTS_REDIRECTS,
    RobotsFinal,
    RobotsFollow,
    RobotsPolicy,
    interpret_robots_response,
    product_token,
    robots_url,
)


@dataclass(frozen=True, slots=True)
class RobotsCacheStatistics:
    """Counters for logs and tests.

    ``origins``: origins with a stored policy (fresh or stale);
    ``fetching``: origins whose robots.txt is being fetched right now;
    ``requests``: HTTP requests made, redirect hops included;
    ``unreachable``: decisions that ended in the temporary disallow-all.
    """

    origins: int
    fetching: int
    requests: int
    unreachable: int


@dataclass(slots=True)
class _Entry:
    policy: RobotsPolicy
    expires_at: float


class RobotsCache:
    """Per-origin robots.txt policies, fetched on demand through a ``Fetcher``.

    Args:
        fetcher: the crawl's fetcher; robots.txt is fetched with
            ``any_body=True``. It sends our User-Agent itself.
        user_agent: our User-Agent header; its product token picks the group.
        clock: seconds on the same scale as expiry times; trio's clock by
            default, so ``MockClock`` drives expiry in tests.
        retry_period: how long an unreachable robots.txt disallows its origin.
        max_age: how long a fetched (or allow-all) policy is used.
        max_redirects: redirect hops followed for one robots.txt.

    Example::

        cache = RobotsCache(robots_fetcher, config.user_agent)
        policy = cache.policy_nowait(url) or await cache.policy_for(url)
        if not policy.allows(url): ...
    """

    def __init__(
        self,
        fetcher: Fetcher,
        user_agent: str,
        clock: Callable[[], float] = trio.current_time,
        *,
        retry_period: float = DEFAULT_RETRY_PERIOD,
        max_age: float = DEFAULT_MAX_AGE,
        max_redirects: int = MAX_ROBOTS_REDIRECTS,
    ) -> None:
        product_token(user_agent)  # fail now, not on the first fetch
        if retry_period < 0 or max_age < 0 or max_redirects < 0:
            raise ValueError("retry_period, max_age and max_redirects must be >= 0")
        self._fetcher = fetcher
        self._user_agent = user_agent
        self._clock = clock
        self._retry_period = retry_period
        self._max_age = max_age
        self._max_redirects = max_redirects
        self._entries: dict[str, _Entry] = {}
        self._inflight: dict[str, trio.Event] = {}
        self._requests = 0
        self._unreachable = 0
        self._host_failures: dict[str, FetchError] = {}

    def policy_nowait(self, url: str) -> RobotsPolicy | None:
        """The fresh cached policy for ``url``'s origin, or None if a fetch is needed.

        Not a checkpoint. Raises ``ValueError`` like ``robots_url``.
        """
        entry = self._entries.get(robots_url(url))
        if entry is not None and self._clock() < entry.expires_at:
            return entry.policy
        return None

    async def policy_for(self, url: str) -> RobotsPolicy:
        """The policy for ``url``'s origin, fetching its robots.txt if needed.

        Always a checkpoint. Cancellation while waiting for another task's
        fetch just stops waiting; cancellation of the fetching task abandons
        the fetch and lets a waiter take over. Raises ``ValueError`` for a URL
        that is not absolute http(s).
        """
        key = robots_url(url)
        while True:
            entry = self._entries.get(key)
            if entry is not None and self._clock() < entry.expires_at:
                await trio.lowlevel.checkpoint()
                return entry.policy
            event = self._inflight.get(key)
            if event is not None:
                await event.wait()
                continue
            event = self._inflight[key] = trio.Event()
            try:
                final = await self._fetch(key)
                self._entries[key] = _Entry(final.policy, self._clock() + final.ttl)
                return final.policy
            finally:
                del self._inflight[key]
                event.set()

    def host_failure(self, url: str) -> FetchError | None:
        """The error of the last robots.txt fetch of ``url``'s origin if it
        means the host cannot be talked to (``HOST_FAILURE_KINDS``: refused,
        silent until the timeout, a TLS handshake that failed, a connection
        reset, an answer that is not HTTP): not a robots.txt problem, its
        pages would fail the same way. Not a checkpoint."""
        return self._host_failures.get(robots_url(url))

    def statistics(self) -> RobotsCacheStatistics:
        return RobotsCacheStatistics(
            origins=len(self._entries),
            fetching=len(self._inflight),
            requests=self._requests,
            unreachable=self._unreachable,
        )

    def __repr__(self) -> str:
        s = self.statistics()
        return (
            f"<RobotsCache origins={s.origins} fetching={s.fetching} "
            f"requests={s.requests} unreachable={s.unreachable}>"
        )

    async def _fetch(self, key: str) -> RobotsFinal:
        """Fetch ``key`` and follow its redirects until a final decision."""
        url = key
        hops = 0
        while True:
            self._requests += 1
            failure: FetchError | None = None
            try:
                result = await self._fetcher.fetch(url, any_body=True)
            except FetchError as exc:
                if exc.kind == "too_large":
                    # An answer too big to read is not an unreachable server:
                    # RFC 9309 2.3.1.3 "unavailable", so everything is allowed.
                    reason = f"robots.txt unavailable: {exc.message}"
                    return RobotsFinal(RobotsPolicy.allow_all(reason), self._max_age)
                failure = exc
                status: int | None = None
                body = b""
                location = None
            else:
                if result.body_skipped and 200 <= result.status < 300:
                    raise RuntimeError(
                        f"the fetcher skipped the body of {url} although any_body=True "
                        "was asked: a Fetcher bug"
                    )
                status, body, location = result.status, result.body, result.headers.get("location")
            decision = interpret_robots_response(
                url,
                status,
                body,
                location,
                user_agent=self._user_agent,
                hops=hops,
                max_redirects=self._max_redirects,
                retry_period=self._retry_period,
                max_age=self._max_age,
            )
            if isinstance(decision, RobotsFollow):
                url = decision.url
                hops += 1
                continue
            if failure is not None and failure.kind in HOST_FAILURE_KINDS:
                self._host_failures[key] = failure
            else:
                self._host_failures.pop(key, None)
            if decision.policy.temporary:
                self._unreachable += 1
                if failure is not None:  # say why: "connect: Connection refused"
                    reason = f"robots.txt unreachable ({failure})"
                    policy = RobotsPolicy.disallow_all(reason, temporary=True)
                    return RobotsFinal(policy, decision.ttl)
            return decision
