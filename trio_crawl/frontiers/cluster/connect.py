"""Connecting a crawl to a Redis Cluster: the ``redis+cluster://`` URL, the
cluster client, and telling a cluster node from a lone server.

A crawl's keys share one hash tag (``tc:{ID}:``), so on a cluster the whole
crawl lives in one slot on one primary: each function call names the prefix
as its key, the cluster client routes it to the slot's primary, and the
library's calls stay exactly the one-Redis calls. What differs is around
them: the library must be on every primary (a slot may move, a replica may
be promoted), the eviction policy of every primary counts, and a call may
only be retried when the cluster said it did not run it.

coredis is imported lazily, as in ``frontiers/redis/client.py``.
"""

from __future__ import annotations

import urllib.parse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import coredis

#: The scheme that asks for a cluster client (the rest is a redis:// URL).
SCHEME = "redis+cluster"
#: Its TLS form.
TLS_SCHEME = "rediss+cluster"


def is_cluster_url(url: str) -> bool:
    """``url`` asks for a Redis Cluster (``redis+cluster://HOST:PORT``)."""
    return urllib.parse.urlsplit(url).scheme in (SCHEME, TLS_SCHEME)


def node_url(url: str) -> str:
    """The ``redis://`` (``rediss://``) URL of the cluster node ``url`` names:
    the address a client starts from to discover the whole cluster."""
    parts = urllib.parse.urlsplit(url)
    scheme = {SCHEME: "redis", TLS_SCHEME: "rediss"}.get(parts.scheme, parts.scheme)
    return urllib.parse.urlunsplit(parts._replace(scheme=scheme))


def database_problem(url: str) -> str | None:
    """Why ``url`` cannot name a cluster: a cluster has database 0 only."""
    parts = urllib.parse.urlsplit(url)
    db = parts.path.strip("/")
    for key, value in urllib.parse.parse_qsl(parts.query):
        if key == "db":
            db = value
    if db not in ("", "0"):
        return f"a Redis Cluster has database 0 only, not {db}"
    return None


def cluster_client(url: str, password: str | None) -> coredis.RedisCluster[bytes]:
    """A cluster client that never sends a call twice unless the cluster
    said it did not run it: coredis retries a lost connection by default,
    and a second take would lease URLs this worker never hears of. It
    retries ``CLUSTERDOWN`` (a failover in progress: nothing ran) and follows
    ``MOVED``/``ASK``/``TRYAGAIN`` itself, which also ran nothing."""
    import coredis
    from coredis.connection import TCPLocation
    from coredis.exceptions import ClusterDownError
    from coredis.retry import ConstantRetryPolicy

    parts = urllib.parse.urlsplit(node_url(url))
    client: coredis.RedisCluster[bytes] = coredis.RedisCluster(
        startup_nodes=[TCPLocation(parts.hostname or "localhost", parts.port or 6379)],
        username=urllib.parse.unquote(parts.username) if parts.username else None,
        password=urllib.parse.unquote(parts.password) if parts.password else password,
        ssl=parts.scheme == "rediss",
        decode_responses=False,
        connect_timeout=5,
        retry_policy=ConstantRetryPolicy((ClusterDownError,), retries=20, delay=0.25),
    )
    return client


def is_cluster(client: Any) -> bool:
    """``client`` is a cluster client (the crawl's calls stay the same)."""
    import coredis

    return isinstance(client, coredis.RedisCluster)


async def serves_cluster(client: coredis.Redis[bytes] | coredis.RedisCluster[bytes]) -> bool:
    """The server behind the plain ``client`` is a cluster node (``INFO
    cluster``: one short call), so the crawl needs a cluster client."""
    info = await client.info("cluster")
    return str(info.get("cluster_enabled", "0")) == "1"


async def eviction_policies(client: coredis.RedisCluster[bytes]) -> dict[str, str]:
    """Every reachable primary's ``maxmemory-policy``, by its address: a
    crawl's slot may move to any of them. One that cannot be reached is
    failing over (or gone): the crawl's own calls say so if it matters."""
    policies: dict[str, str] = {}
    kwargs = client.connection_pool.connection_kwargs
    for location in client.connection_pool.cluster_layout.primaries:
        policy = await _policy_of(location.as_client(**kwargs))
        if policy is not None:
            policies[f"{location.host}:{location.port}"] = policy
    return policies


async def _policy_of(node: coredis.Redis[bytes]) -> str | None:
    """One node's ``maxmemory-policy``; None when it cannot be reached (its
    client's connection task fails inside a group, as coredis runs it)."""
    from coredis.exceptions import ConnectionError as Unreachable

    info: dict[str, Any] | None = None
    try:
        async with node:
            info = await node.info("memory")
    except* (Unreachable, OSError):  # failing over: the crawl's calls will say so
        pass
    return None if info is None else str(info.get("maxmemory_policy", ""))
