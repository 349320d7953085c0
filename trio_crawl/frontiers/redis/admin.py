"""What the CLI does to a crawl from outside it: ``--status``,
``--delete-crawl``, and the consistency check the tests run after a crawl.
Each opens a client of its own and needs no worker."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...errors import RedisFrontierError, RedisLost, RedisRefused
from . import lua
from .client import keys_prefix, one_line, open_client, redact_url

if TYPE_CHECKING:
    from .client import Client


async def _call_ro(client: Client, url: str, name: str, prefix: str) -> Any:
    """A read-only function of the library, loading it first if needed. An
    error reply (OOM refuses the load) is ``RedisRefused``; a lost
    connection ``RedisLost``: one line each, never a coredis traceback."""
    import coredis.exceptions

    function = lua.function(name)
    try:
        try:
            return await client.fcall_ro(function, keys=[prefix])
        except coredis.exceptions.ResponseError as exc:
            if "Function not found" not in str(exc):
                raise
        try:
            await client.function_load(lua.LIBRARY)
        except coredis.exceptions.ResponseError as load_error:
            if "already exists" not in str(load_error):
                raise
        return await client.fcall_ro(function, keys=[prefix])
    except coredis.exceptions.ResponseError as exc:
        raise RedisRefused(
            f"Redis at {redact_url(url)} refused a call ({one_line(str(exc))})"
        ) from None
    except (coredis.exceptions.RedisError, OSError) as exc:
        raise RedisLost(
            f"lost the connection to Redis at {redact_url(url)} ({one_line(str(exc))})"
        ) from None


async def check_crawl(url: str, crawl_id: str) -> list[str]:
    """A read-only consistency check of crawl ``crawl_id``: the counters
    recomputed from the keys (queued, leased, deferred, per depth, per host,
    seen), and no URL in two places or in none. What disagrees, one line
    each; an empty list when everything agrees. Safe on a running crawl (it
    is one atomic call), but meant for tests and for a crawl at rest."""
    async with open_client(url) as client:
        reply = await _call_ro(client, url, "check", keys_prefix(crawl_id))
    return [line.decode() if isinstance(line, bytes) else str(line) for line in reply]


async def delete_crawl(url: str, crawl_id: str, *, force: bool = False) -> int:
    """Delete every key of crawl ``crawl_id``; the number deleted (0: none
    there). A crawl with live workers is refused (``RedisFrontierError``)
    unless it is done or ``force``; its workers would stop with ``CrawlGone``."""
    status = await crawl_status(url, crawl_id)
    if status is not None and status.get("workers") and not status.get("done") and not force:
        raise RedisFrontierError(
            f"crawl {crawl_id!r} is running ({status['workers']} live workers): stop them "
            "first, or let it finish"
        )
    prefix = keys_prefix(crawl_id)
    pattern = "".join("\\" + c if c in "*?[]\\" else c for c in prefix) + "*"
    deleted = 0
    async with open_client(url) as client:
        # The counters first: from then on every worker's call says "gone".
        deleted += await client.delete([prefix + "m"])
        batch: list[str | bytes] = []
        async for key in client.scan_iter(match=pattern, count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                deleted += await client.unlink(batch)
                batch = []
        if batch:
            deleted += await client.unlink(batch)
    return deleted


async def crawl_status(url: str, crawl_id: str) -> dict[str, Any] | None:
    """The crawl's counters and settings (None: no such crawl)."""
    async with open_client(url) as client:
        reply = await _call_ro(client, url, "status", keys_prefix(crawl_id))
    it = iter(reply)
    raw = {k.decode(): v.decode() for k, v in zip(it, it, strict=True)}
    if not raw.get("cfg"):
        return None
    status: dict[str, Any] = {k: int(float(v)) for k, v in raw.items() if v and k != "cfg"}
    status["settings"] = json.loads(raw["cfg"])
    return status


def status_lines(
    crawl_id: str, status: Mapping[str, Any], *, ended_here: bool = False
) -> list[str]:
    """``--status``: the crawl's state, start URLs and counters. A crawl not
    done is "running" while some worker's lease holds (a killed worker's
    holds until it runs out); ``ended_here``: the caller's workers have all
    ended, so it says so rather than "running"."""
    settings = status["settings"]
    if status.get("done"):
        state = "done"
    elif ended_here:
        state = "not done: the workers started here have ended (run again to resume)"
    elif status.get("workers"):
        state = "running"
    else:
        state = "stopped: no live worker (run one to resume)"
    budget = settings.get("max_pages")
    lines = [
        f"crawl {crawl_id}: {state}",
        f"start URLs: {' '.join(settings.get('start_urls') or [])}",
        "finished {finished:,}  queued {queued:,}  leased {leased:,}  retrying {delayed:,}  "
        "seen {seen:,}  started {started:,}{budget}  workers {workers}".format(
            finished=status.get("finished", 0),
            queued=status.get("unfinished", 0)
            - status.get("leased", 0)
            - status.get("delayed", 0),
            leased=status.get("leased", 0),
            delayed=status.get("delayed", 0),
            seen=status.get("n", 0),
            started=status.get("started", 0),
            budget=f"/{budget:,}" if budget is not None else "",
            workers=status.get("workers", 0),
        ),
    ]
    if "bhosts" in status:  # host budgets (``budgets.py``), counted in Redis
        most, per_host = settings.get("max_hosts"), settings.get("max_pages_per_host")
        of = f" of at most {most:,}" if most is not None else ""
        each = f", at most {per_host:,} URLs a host" if per_host is not None else ""
        lines.append(f"host budgets: {status['bhosts']:,} hosts admitted{of}{each}")
    missed = status.get("missed", 0)  # counted by Redis as workers give the turns back
    if missed:
        lines.append(
            f"rate turns missed: {missed:,} {'page' if missed == 1 else 'pages'} given back "
            "unstarted (no crawler was free at its --rate turn)"
        )
    return lines
