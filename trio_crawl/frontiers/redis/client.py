"""Connecting to a Redis server: the client, its URL, and the server checks.

coredis is imported here (and in ``calls.py``) lazily, so ``--redis`` says in
one line that it is missing. A Redis URL goes into messages only masked
(``redact_url``): its password, in the ``user:pw@`` form or as a
``?password=`` query parameter, is never printed.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import urllib.parse
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import trio

from ...core.url import mask_credentials
from ...errors import RedisFrontierError, RedisUnavailable
from ..cluster import connect as cluster

if TYPE_CHECKING:
    import coredis

    #: A client of one Redis or of a Redis Cluster: the crawl's calls are the same.
    Client = coredis.Redis[bytes] | coredis.RedisCluster[bytes]


#: The environment variable a Redis password may come from. A password in
#: the URL is in the command line, which every user of the machine can read
#: (``ps``, /proc); from the environment, only the process's owner.
PASSWORD_ENV = "TRIO_CRAWL_REDIS_PASSWORD"

#: ``?password=...`` (and ``&password=``) in a URL's query.
_QUERY_PASSWORD = re.compile(r"([?&](?:password|pass|pwd|auth)=)[^&#\s'\"]*", re.IGNORECASE)
_SCHEMES = ("redis", "rediss", "unix", cluster.SCHEME, cluster.TLS_SCHEME)


def redact_url(url: str) -> str:
    """``url`` as it may be printed: its password (in the userinfo or a
    ``password=`` query parameter, or a lone user name, often a token)
    replaced by ``***``. Also masks every URL in a longer text."""
    return _QUERY_PASSWORD.sub(r"\1***", mask_credentials(url))


def url_problem(url: str) -> str | None:
    """Why ``url`` is not a Redis URL this crawl can use; None if it is.
    coredis reads ``redis://host/x`` as database 0 without a word."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as exc:
        return f"bad Redis URL {redact_url(url)!r}: {exc}"
    if parts.scheme not in _SCHEMES:
        return (
            f"bad Redis URL {redact_url(url)!r}: it must start with redis://, rediss://, "
            "unix:// or redis+cluster://"
        )
    db = parts.path.strip("/") if parts.scheme != "unix" else ""
    for key, value in urllib.parse.parse_qsl(parts.query):
        if key == "db":
            db = value
    if db and not db.isdigit():
        return (
            f"bad Redis URL {redact_url(url)!r}: the database must be a number "
            f"(redis://host:6379/0), not {db!r}"
        )
    if cluster.is_cluster_url(url) and (problem := cluster.database_problem(url)):
        return f"bad Redis URL {redact_url(url)!r}: {problem}"
    return None


def url_without_password(url: str) -> tuple[str, str | None]:
    """``url`` without its password (userinfo or query), and the password.
    For a child process's command line: the password goes in its environment."""
    parts = urllib.parse.urlsplit(url)
    password = parts.password
    netloc = parts.netloc
    if password is not None:
        userinfo, _, hostport = netloc.rpartition("@")
        user = userinfo.partition(":")[0]
        netloc = f"{user}@{hostport}" if user else hostport
    query = []
    for key, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
        if key == "password":
            password = value
        else:
            query.append((key, value))
    stripped = parts._replace(netloc=netloc, query=urllib.parse.urlencode(query))
    return urllib.parse.urlunsplit(stripped), password


def keys_prefix(crawl_id: str) -> str:
    """``tc:{ID}:``, the prefix of every key of crawl ``crawl_id``. A ``}`` in
    the id is written ``%7D`` (and ``%`` as ``%25``): the first ``}`` then
    ends every crawl's prefix, so no crawl's keys begin with another's
    prefix (``p`` and ``p}:x``), and ``--delete-crawl p`` deletes exactly
    crawl ``p``. An id without ``}`` or ``%`` is written as it is."""
    tag = crawl_id.replace("%", "%25").replace("}", "%7D")
    return f"tc:{{{tag}}}:"


def default_worker_name(output: str | None) -> str:
    """This worker's name in the crawl: host and output file (a re-run with
    the same output takes its earlier run's leases back at once), else pid."""
    host = socket.gethostname()
    if output and output != "-":
        return f"{host}:{os.path.abspath(output)}"
    return f"{host}:pid{os.getpid()}"


def one_line(text: str) -> str:
    """An error's text for a one-line message, any URL in it masked."""
    return redact_url(" ".join(text.split()))


def _single(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _redis_error_in(group: BaseException) -> RedisFrontierError | None:
    if isinstance(group, RedisFrontierError):
        return group
    if isinstance(group, BaseExceptionGroup):
        for exc in group.exceptions:
            found = _redis_error_in(exc)
            if found is not None:
                return found
    return None


def _client_for(url: str, as_cluster: bool = False) -> Client:
    try:
        import coredis
    except ImportError:  # pragma: no cover - depends on the install
        raise RedisUnavailable(
            "--redis needs the coredis package: pip install 'trio-crawl[redis]'"
        ) from None
    problem = url_problem(url)
    if problem is not None:
        raise RedisUnavailable(problem)
    password = os.environ.get(PASSWORD_ENV) or None  # one in the URL wins
    try:
        from coredis.retry import NoRetryPolicy

        if as_cluster or cluster.is_cluster_url(url):
            return cluster.cluster_client(url, password)
        # No retries: a sync call that reached Redis must not run twice (a
        # second take would lease URLs this worker never hears of).
        client: coredis.Redis[bytes] = coredis.Redis.from_url(
            url, connect_timeout=5, retry_policy=NoRetryPolicy(), password=password
        )
        return client
    except ValueError as exc:
        raise RedisUnavailable(f"bad Redis URL {redact_url(url)!r}: {exc}") from None


@contextlib.asynccontextmanager
async def open_client(url: str, as_cluster: bool = False) -> AsyncIterator[Client]:
    """A connected coredis client. coredis runs its connections in a task
    group, so its errors come as ExceptionGroups: they leave this block as
    single exceptions (``RedisUnavailable`` when it cannot connect). A
    ``redis://`` URL that names a cluster node gets a cluster client
    (``cluster.serves_cluster``): the crawl's slot may be on another node."""
    client = _client_for(url, as_cluster)  # first: one line if coredis is missing
    import coredis.exceptions

    entered = False
    try:
        async with client:
            entered = True
            try:
                with trio.fail_after(10):
                    # A cluster client has read the slots from a node it reached
                    # (its PING would ask every primary: one may be failing over).
                    if not cluster.is_cluster(client):
                        await client.ping()
            except (coredis.exceptions.RedisError, OSError, trio.TooSlowError) as exc:
                message = f"cannot connect to Redis at {redact_url(url)}: {one_line(str(exc))}"
                raise RedisUnavailable(message) from None
            if not cluster.is_cluster(client) and await cluster.serves_cluster(client):
                if problem := cluster.database_problem(url):
                    raise RedisUnavailable(
                        f"Redis at {redact_url(url)} is a cluster node: {problem}"
                    )
                async with open_client(url, as_cluster=True) as cluster_client:
                    yield cluster_client
                return
            yield client
    except BaseExceptionGroup as group:
        found = _redis_error_in(group)
        if found is not None:
            raise found from None
        single = _single(group)
        if not entered and isinstance(single, (coredis.exceptions.RedisError, OSError)):
            message = f"cannot connect to Redis at {redact_url(url)}: {one_line(str(single))}"
            raise RedisUnavailable(message) from None
        if single is not group:
            raise single from None
        raise
    except coredis.exceptions.RedisError as exc:  # a cluster client that reached no node
        if entered:
            raise
        message = f"cannot connect to Redis at {redact_url(url)}: {one_line(str(exc))}"
        raise RedisUnavailable(message) from None


async def eviction_policy(client: Client) -> str | None:
    """The server's ``maxmemory-policy`` (None if INFO is not allowed); on a
    cluster, the first primary's that may evict (else ``noeviction``)."""
    import coredis.exceptions

    try:
        if cluster.is_cluster(client):
            policies = await cluster.eviction_policies(client)  # type: ignore[arg-type]
            evicting = [f"{p} on {where}" for where, p in policies.items() if p != "noeviction"]
            return evicting[0] if evicting else "noeviction"
        info = await client.info("memory")
    except coredis.exceptions.ResponseError:
        return None
    policy = info.get("maxmemory_policy")
    return None if policy is None else str(policy)


async def refuse_eviction(client: Client, url: str) -> None:
    """``RedisUnavailable`` unless the server keeps every key: with any other
    ``maxmemory-policy`` Redis may evict a queue or a lease under memory
    pressure, and the crawl would wait forever for URLs that no longer exist."""
    policy = await eviction_policy(client)
    if policy is not None and policy != "noeviction":
        raise RedisUnavailable(
            f"Redis at {redact_url(url)} may evict keys (maxmemory-policy {policy}): a crawl "
            "needs maxmemory-policy noeviction (CONFIG SET maxmemory-policy noeviction)"
        )


async def check_server(url: str) -> None:
    """Connect, and refuse a server that may evict keys (``RedisUnavailable``)."""
    async with open_client(url) as client:
        await refuse_eviction(client, url)
