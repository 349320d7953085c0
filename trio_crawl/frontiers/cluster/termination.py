"""The termination protocol's shard side on a real Redis Cluster: key names
with hash tags, and one coroutine per Lua function of ``termination.lua``.

A shard is one hash tag, ``{<crawl>/<n>}``: all of a shard's keys share it,
so they live in one slot, and each function call touches that slot alone,
atomically, on the one node that owns it (a call naming keys of two slots is
refused by the cluster, ``CROSSSLOT``). A host belongs to one shard
(``shard_of``), so its queue, leases and seen set are on one node. The
detector reads the shards one call each (``probe``) and hands the readings
to ``core.shard_termination.Detector``.

The caller brings the client (``coredis.RedisCluster``; a plain
``coredis.Redis`` serves for one node): this module imports no client.
"""

from __future__ import annotations

import zlib
from importlib import resources
from typing import Any, cast

from ...core.shard_termination import ShardReading

#: The Lua library, for ``FUNCTION LOAD`` on every primary.
LIBRARY = resources.files(__package__).joinpath("termination.lua").read_text("utf-8")

_ROLES = ("q", "seen", "lo", "lx", "m")


def shard_keys(crawl: str, shard: int) -> list[str]:
    """The keys of ``shard``, in the order the Lua functions take them."""
    if not crawl or any(c in crawl for c in "{}"):
        raise ValueError(f"a crawl id without braces, not {crawl!r}")
    return [f"tcs:{{{crawl}/{shard}}}:{role}" for role in _ROLES]


def shard_of(host: str, shards: int) -> int:
    """The shard of ``host``: stable across processes and runs (CRC-32, not
    Python's salted ``hash``)."""
    return zlib.crc32(host.encode()) % shards


async def load(client: Any) -> None:
    """Load (or replace) the library on every primary."""
    await client.function_load(LIBRARY, replace=True)


async def open_shard(client: Any, crawl: str, shard: int) -> int:
    """Create ``shard``'s books (before the crawl's first admission): every
    other call refuses a shard whose books are gone (``TCGONE``)."""
    return int(await client.fcall("tcs_open", shard_keys(crawl, shard), []))


async def _call(client: Any, function: str, keys: list[str], args: list[str]) -> list[Any]:
    return cast(list[Any], await client.fcall(function, keys, args))


async def admit(client: Any, crawl: str, shard: int, urls: list[str]) -> tuple[int, int]:
    """Queue the ``urls`` new to ``shard``: (how many were new, activity)."""
    new, activity = await _call(client, "tcs_admit", shard_keys(crawl, shard), urls)
    return int(new), int(activity)


async def lease(
    client: Any, crawl: str, shard: int, worker: str, ttl_ms: int
) -> tuple[str | None, int]:
    """The next queued URL of ``shard``, leased to ``worker`` for ``ttl_ms``
    (None when none is queued), and the shard's activity."""
    url, activity = await _call(
        client, "tcs_lease", shard_keys(crawl, shard), [worker, str(ttl_ms)]
    )
    return (url.decode() if isinstance(url, bytes) else url), int(activity)


async def release(client: Any, crawl: str, shard: int, worker: str, url: str) -> bool:
    """``worker`` finished ``url``; False when its lease had expired."""
    done = await client.fcall("tcs_release", shard_keys(crawl, shard), [worker, url])
    return bool(done)


async def probe(client: Any, crawl: str, shard: int) -> ShardReading:
    """The detector's one call to ``shard`` (it reclaims expired leases first)."""
    idle, activity = await _call(client, "tcs_probe", shard_keys(crawl, shard), [])
    return ShardReading(shard, bool(idle), int(activity))


async def seal(client: Any, crawl: str, shard: int, activity: int) -> bool:
    """After "done": refuse admissions and leases on ``shard`` from now on,
    if it is still idle with the ``activity`` the detector read. False when
    it moved, which the protocol rules out: the verdict must not stand."""
    return bool(await client.fcall("tcs_seal", shard_keys(crawl, shard), [str(activity)]))
