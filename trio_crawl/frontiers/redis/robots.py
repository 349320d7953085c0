"""robots.txt once per crawl: one worker fetches a host's robots.txt under a
claim (``SET NX``) and stores the response (or the failure) in Redis; the
others wait for the stream's "r" wake-up and read it. Stored for a day, a
failure for a few seconds (the robots cache asks again after its retry
period)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import trio

from ...core.models import FetchResult
from ...errors import FetchError
from .calls import Calls

#: How long a shared robots.txt response is kept (a failure: a few seconds).
ROBOTS_TTL = 24 * 3600.0
ROBOTS_FAILURE_TTL = 5.0
#: How long a claim holds: a claimant that died lets another claim again.
CLAIM_SECONDS = 30


async def fetch_robots_once(
    calls: Calls,
    owner: str,
    changed: Callable[[], trio.Event],
    url: str,
    fetch: Callable[[], Awaitable[FetchResult]],
) -> FetchResult:
    """The response for robots.txt ``url`` (see the module docstring).
    ``changed()`` is the event the next "r" wake-up sets."""
    from coredis.tokens import PureToken

    client = calls.client
    key = f"{calls.prefix}rb:{url}"
    claim = f"{calls.prefix}rbl:{url}"
    while True:
        event = changed()  # before looking: a later store wakes us
        stored = await calls.command(client.get(key))
        if stored is not None:
            return _response(url, stored)
        if await calls.command(
            client.set(claim, owner, condition=PureToken.NX, px=CLAIM_SECONDS * 1000)
        ):
            break
        with trio.move_on_after(CLAIM_SECONDS):  # the claimant may have died
            await event.wait()
    try:
        result = await fetch()
    except FetchError as exc:
        value = json.dumps({"error": exc.kind, "message": exc.message})
        ttl = ROBOTS_FAILURE_TTL
        raised: FetchError | None = exc
    else:
        value = json.dumps(
            {
                "status": result.status,
                "headers": result.headers,
                "body": result.body.decode("latin-1"),
                "skipped": result.body_skipped,
            }
        )
        ttl = ROBOTS_TTL if result.status < 500 else ROBOTS_FAILURE_TTL
        raised = None
    await calls.command(client.set(key, value, px=round(ttl * 1000)))
    await calls.command(client.xadd(calls.prefix + "wake", {"r": "1"}, trim_strategy=None))
    if raised is not None:
        raise raised
    return result


def _response(url: str, stored: bytes) -> FetchResult:
    data = json.loads(stored)
    if "error" in data:
        raise FetchError(data["error"], data["message"])
    return FetchResult(
        url,
        data["status"],
        data["headers"],
        data["body"].encode("latin-1"),
        0.0,
        data["skipped"],
    )
