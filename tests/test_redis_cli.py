"""``trio-crawl --redis``: real worker processes, a real redis-server and a
real local site (trio_crawl.testing). The union of the workers' outputs must
be the single-process crawl; killed workers lose nothing; the server sees
``--rate`` kept across all workers; every worker ends at the same moment.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from trio_crawl.testing import Response, Site, SiteRequest, page, redirect, serve_site

import redis_fixture
from cli_helpers import run_cli as cli
from cli_helpers import start_cli
from redis_fixture import RedisServer, start_redis

# coredis needs anyio 4: not there in `nox -s asks` (anyio 3 for asks).
pytest.importorskip("coredis", reason="coredis is not installed (pip install 'trio-crawl[redis]')")

redis_server = redis_fixture.redis_server
crawl_id = redis_fixture.crawl_id

TIMEOUT = 90


start_worker = start_cli  # a worker in the background, as a user starts one


def wait_all(processes: Sequence[subprocess.Popen[str]]) -> tuple[list[int], list[float]]:
    """Wait for every process; their exit codes and exit times (monotonic)."""
    ends = [0.0] * len(processes)

    def wait(i: int) -> None:
        processes[i].wait(timeout=TIMEOUT)
        ends[i] = time.monotonic()

    threads = [threading.Thread(target=wait, args=(i,)) for i in range(len(processes))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [p.returncode for p in processes], ends


def records(path: Path) -> list[dict[str, Any]]:
    """The records of an output file (a torn last line, left by a kill, skipped).
    An output holds records only: depth corrections go to --depth-updates."""
    out = []
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
        assert "depth_update" not in out[-1], f"a depth_update line in {path}: {out[-1]}"
    return out


def with_final_depths(
    records: list[dict[str, Any]], update_files: Sequence[Path]
) -> list[dict[str, Any]]:
    """The records with the corrections of the workers' --depth-updates files
    folded in (the lowest depth wins: the files come in any order)."""
    lowest: dict[str, dict[str, Any]] = {}
    for path in update_files:
        for update in (json.loads(line) for line in path.read_text().splitlines()):
            assert update["depth_update"] is True, update
            if update["url"] not in lowest or update["depth"] < lowest[update["url"]]["depth"]:
                lowest[update["url"]] = update
    recorded = {r["url"] for r in records}
    assert set(lowest) <= recorded, set(lowest) - recorded  # each corrects a record
    return [
        dict(r, depth=lowest[r["url"]]["depth"], referrer=lowest[r["url"]]["referrer"])
        if r["url"] in lowest and lowest[r["url"]]["depth"] < r["depth"]
        else r
        for r in records
    ]


def key(record: dict[str, Any]) -> tuple[object, ...]:
    error = record["error"]["kind"] if record["error"] else None
    return (record["url"], record["status"], record["depth"], error, record["redirect"])


def held(response: Response, until: Callable[[], bool]) -> Callable[[SiteRequest], Response]:
    """A route that answers once ``until()`` (a server-side fact: a count in
    Redis, an event) is true; after 60 s it answers anyway, and the test fails
    on what it finds."""

    def answer(request: SiteRequest) -> Response:
        deadline = time.monotonic() + 60
        while not until() and time.monotonic() < deadline:
            time.sleep(0.01)
        return response

    return answer


def workers_joined(server: RedisServer, crawl_id: str, n: int) -> Callable[[], bool]:
    """Whether ``n`` workers are registered in the crawl (Redis's count)."""
    return lambda: int(server.command("ZCARD", f"tc:{{{crawl_id}}}:w")[1:]) >= n


def random_site(seed: int, size: int, root_until: Callable[[], bool] = lambda: True) -> Site:
    """Pages linking at random, with a robots.txt rule, 404s, a redirect
    chain, a redirect loop and a 503 that answers on the retry. The root
    answers once ``root_until()``: every worker is up before there is work
    to share."""
    rng = random.Random(seed)
    root = page(*[f"/p/{i}" for i in range(min(size, 8))], "/r/a", "/loop/1")
    routes: dict[str, Any] = {
        "/": held(root, root_until),
        "/robots.txt": Response(
            body=b"User-agent: *\nDisallow: /p/7\n", content_type="text/plain"
        ),
        "/r/a": redirect("/r/b"),
        "/r/b": redirect("/p/1"),
        "/loop/1": redirect("/loop/2"),
        "/loop/2": redirect("/loop/1"),
    }
    for i in range(size):
        links = [f"/p/{rng.randrange(size + 5)}" for _ in range(rng.randint(0, 6))]
        # slow enough that every worker is up before the crawl is over
        body = dataclasses.replace(page(*links), delay=0.02)
        if rng.random() < 0.05:
            routes[f"/p/{i}"] = [Response(status=503), body]
        else:
            routes[f"/p/{i}"] = body
    return Site(routes)


@pytest.fixture
def site() -> Iterator[Any]:
    with serve_site(random_site(7, 250)) as server:
        yield server


@pytest.fixture
def gated_site() -> Iterator[tuple[Any, threading.Event, list[Callable[[], bool]]]]:
    """``site``, whose root, once the event is set, answers only when the
    condition put in the list holds (e.g. every worker joined)."""
    gate_on = threading.Event()
    condition: list[Callable[[], bool]] = []

    def until() -> bool:
        return not gate_on.is_set() or all(c() for c in condition)

    with serve_site(random_site(7, 250, until)) as server:
        yield server, gate_on, condition


#: The single-process crawls run so far in this process, by the site's name
#: and the options, with the server's base URL as ``BASE``: the sites here are
#: deterministic (their links come from a seeded random), so the reference
#: crawl of one is the same on any port. Each test still runs its workers
#: against a server of its own; only the one-process reference is shared.
_REFERENCES: dict[tuple[str, ...], tuple[str, str]] = {}
BASE = "http://reference.invalid"


def single_crawl(
    url: str, tmp_path: Path, *extra: str, site: str | None = None
) -> list[dict[str, Any]]:
    """A crawl in one process, in memory: its records with their final
    depths. With ``site`` (a name that says which site ``url`` is the root
    of, as built), run once per process and options, then reused."""
    out, updates = tmp_path / "single.jsonl", tmp_path / "single.updates.jsonl"
    base = url.removesuffix("/")
    stored = _REFERENCES.get((site, *extra)) if site else None
    if stored is None:
        result = cli(url, "-o", str(out), "--depth-updates", str(updates), "-q", *extra)
        assert result.returncode == 0, result.stderr
        if site:
            texts = (out.read_text(), updates.read_text())
            _REFERENCES[(site, *extra)] = (
                texts[0].replace(base, BASE),
                texts[1].replace(base, BASE),
            )
    else:
        out.write_text(stored[0].replace(BASE, base))
        updates.write_text(stored[1].replace(BASE, base))
    return with_final_depths(records(out), [updates])


def test_unreachable_redis_is_one_line_and_exit_2(tmp_path: Path) -> None:
    port = redis_fixture.free_port()
    result = cli(
        "http://127.0.0.1:1/", "--redis", f"redis://127.0.0.1:{port}/0", "--crawl-id", "x"
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(
        f"trio-crawl: error: cannot connect to Redis at redis://127.0.0.1:{port}/0"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--redis", "redis://127.0.0.1:1/0"], "--redis needs --crawl-id NAME"),
        (["--crawl-id", "x"], "--processes and --crawl-id need --redis URL"),
        (["--redis", "redis://127.0.0.1:1/0", "--crawl-id", "x", "--state", "s.db"], "--state"),
        (
            [
                "--redis",
                "redis://127.0.0.1:1/0",
                "--crawl-id",
                "x",
                "--processes",
                "2",
                "-o",
                "o.jsonl",
                "--depth-updates",
                "-",
            ],
            "--processes needs --depth-updates FILE, not -: each worker writes its own",
        ),
        (
            ["--redis", "redis://127.0.0.1:1/0", "--crawl-id", "x", "--depth-updates", "-"],
            "--depth-updates - and the records (-o -) would both write to stdout",
        ),
    ],
)
def test_usage_errors(args: list[str], message: str) -> None:
    result = cli("http://127.0.0.1:1/", *args)
    assert result.returncode == 2
    assert message in result.stderr


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_workers_together_equal_the_single_process_crawl(
    gated_site: Any, redis_server: RedisServer, crawl_id: str, tmp_path: Path, workers: int
) -> None:
    site, gate_on, condition = gated_site
    url = site.url("/")
    expected = single_crawl(url, tmp_path, site="random_site(7, 250)")
    # From here the root answers once every worker has joined (Redis's count).
    condition.append(workers_joined(redis_server, crawl_id, workers))
    gate_on.set()
    before = len(site.log)
    outputs = [tmp_path / f"w{i}.jsonl" for i in range(workers)]
    updates = [out.with_suffix(".updates.jsonl") for out in outputs]
    common = ["--redis", redis_server.url, "--crawl-id", crawl_id]
    processes = [
        start_worker(url, *common, "-o", str(out), "--depth-updates", str(corrections))
        for out, corrections in zip(outputs, updates, strict=True)
    ]
    codes, ends = wait_all(processes)
    assert codes == [0] * workers, [p.stderr.read() for p in processes]  # type: ignore[union-attr]
    got = with_final_depths([r for out in outputs for r in records(out)], updates)
    assert sorted(map(key, got)) == sorted(map(key, expected))
    # They end together: none before the crawl's last request (the server's clock).
    assert min(ends) >= max(r.time for r in site.log[before:]), ends
    assert sum(1 for out in outputs if records(out)) >= 2  # shared, not one worker alone
    robots = [r for r in site.log[before:] if r.target == "/robots.txt"]
    assert len(robots) == 1, "robots.txt is fetched once for the whole crawl"
    assert_consistent(redis_server, crawl_id)


def test_status_and_joining_a_crawl_without_urls(
    site: Any, redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    url = site.url("/")
    first = tmp_path / "a.jsonl"
    result = cli(url, "--redis", redis_server.url, "--crawl-id", crawl_id, "-o", str(first))
    assert result.returncode == 0, result.stderr
    assert f"started crawl {crawl_id!r}" in result.stderr
    status = cli("--redis", redis_server.url, "--crawl-id", crawl_id, "--status")
    assert status.returncode == 0, status.stderr
    assert f"crawl {crawl_id}: done" in status.stdout
    assert f"finished {len(records(first))}" in status.stdout
    # Joining a finished crawl: nothing to do, exit 0 at once.
    second = tmp_path / "b.jsonl"
    joined = cli("--redis", redis_server.url, "--crawl-id", crawl_id, "-o", str(second))
    assert joined.returncode == 0, joined.stderr
    assert "joined crawl" in joined.stderr
    assert records(second) == []
    # The same id with other settings is refused.
    other = cli(url, "--redis", redis_server.url, "--crawl-id", crawl_id, "--max-depth", "1")
    assert other.returncode == 2
    assert "other settings (max_depth differ)" in other.stderr
    assert_consistent(redis_server, crawl_id)


def test_processes_option_starts_n_workers(
    site: Any, redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    url = site.url("/")
    expected = single_crawl(url, tmp_path, site="random_site(7, 250)")
    out = tmp_path / "out.jsonl"
    result = cli(
        url, "--redis", redis_server.url, "--crawl-id", crawl_id, "--processes", "3",
        "-o", str(out), "--depth-updates", str(tmp_path / "updates.jsonl"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    parts = [tmp_path / f"out.{i}.jsonl" for i in (1, 2, 3)]
    updates = [tmp_path / f"updates.{i}.jsonl" for i in (1, 2, 3)]  # one per worker, like -o
    assert all(p.exists() for p in parts + updates)
    assert not (tmp_path / "updates.jsonl").exists()
    got = with_final_depths([r for p in parts for r in records(p)], updates)
    assert sorted(map(key, got)) == sorted(map(key, expected))
    assert_consistent(redis_server, crawl_id)


def test_each_worker_process_archives_what_it_fetched(
    site: Any, redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    pytest.importorskip("warcio")
    from trio_crawl.outputs.warc import read_warc_responses

    url = site.url("/")
    out, warc = tmp_path / "out.jsonl", tmp_path / "crawl.warc.gz"
    result = cli(
        url, "--redis", redis_server.url, "--crawl-id", crawl_id, "--processes", "2",
        "-o", str(out), "--warc", str(warc),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    all_listed: set[str] = set()
    all_stored: set[str] = set()
    for i in (1, 2):  # out.N.jsonl beside crawl.N.warc.gz
        listed = {r["url"] for r in records(tmp_path / f"out.{i}.jsonl") if r["status"]}
        stored = set(read_warc_responses(str(tmp_path / f"crawl.{i}.warc.gz")))
        assert listed <= stored  # every page a worker lists, its archive has
        all_listed |= listed
        all_stored |= stored
    # A 503 archived by one worker may be retried, and listed, by the other.
    assert all_listed == all_stored
    assert not warc.exists()
    assert_consistent(redis_server, crawl_id)


def slow_site(size: int, delay: float, hold: threading.Event | None = None) -> Site:
    """``size`` pages of ``delay`` s linking at random; with ``hold``, the
    root also links to ``/hold``, which answers once ``hold`` is set: the
    crawl cannot end before that."""
    rng = random.Random(size)
    extra = ["/hold"] if hold is not None else []
    routes: dict[str, Any] = {"/": page(*[f"/p/{i}" for i in range(10)], *extra)}
    if hold is not None:
        routes["/hold"] = held(page(), hold.is_set)
    for i in range(size):
        links = [f"/p/{rng.randrange(size)}" for _ in range(4)]
        routes[f"/p/{i}"] = Response(body=page(*links).body, delay=delay)
    return Site(routes)


@pytest.mark.parametrize("seed", range(6))
def test_a_worker_killed_at_a_random_moment_loses_nothing(
    redis_server: RedisServer, crawl_id: str, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    hold = threading.Event()
    hold.set()  # for the single-process crawl
    with serve_site(slow_site(300, 0.03, hold)) as server:
        url = server.url("/")
        expected = {
            r["url"] for r in single_crawl(url, tmp_path, "-w", "4", site="slow_site(300, hold)")
        }
        # The crawl cannot end before the kill: /hold answers after it.
        hold.clear()
        before = len(server.log)
        outputs = [tmp_path / f"w{i}.jsonl" for i in range(3)]
        common = ["--redis", redis_server.url, "--crawl-id", crawl_id, "-w", "4", "--lease", "2"]
        processes = [start_worker(url, *common, "-o", str(out)) for out in outputs]
        # The kill comes after a random number of the victim's records, with a
        # random delay on top: mid-fetch, mid-write, between a record and its finish
        # (sooner if the others fetched every page but /hold first).
        victim = rng.randrange(3)
        wanted = rng.randint(1, 15)
        deadline = time.monotonic() + 30
        while (
            len(records(outputs[victim])) < wanted
            and len({r.target for r in server.log[before:]}) < len(expected) + 1
            and time.monotonic() < deadline
        ):
            time.sleep(0.005)
        time.sleep(rng.uniform(0, 0.05))
        processes[victim].send_signal(signal.SIGKILL)
        hold.set()
        codes, _ = wait_all(processes)
    assert codes[victim] == -signal.SIGKILL
    assert [c for i, c in enumerate(codes) if i != victim] == [0, 0]
    assert_consistent(redis_server, crawl_id)
    got = [r for out in outputs for r in records(out)]
    counts = Counter(r["url"] for r in got)
    assert set(counts) == expected
    for u, n in counts.items():
        if n > 1:  # fetched again after the kill: the later records say so
            assert sum(bool(r.get("refetched")) for r in got if r["url"] == u) >= n - 1


def short_gaps_not_made_up(gaps: list[float], turn: float) -> list[float]:
    """The gaps under half a turn that a delay does not explain.

    Arrivals held up (a busy machine, the test server's thread) come late and
    then together: a long gap, then a run of short ones, and the long gap
    makes up for the run (together they span at least one turn per arrival).
    A turn taken twice makes a short gap that nothing before it makes up for.
    """
    unexplained: list[float] = []
    before, run = turn, []
    for gap in [*gaps, turn]:
        if gap < 0.5 * turn:
            run.append(gap)
            continue
        if run and before + sum(run) < (len(run) + 0.5) * turn:
            unexplained += run
        before, run = gap, []
    return unexplained


def test_short_gaps_made_up_by_a_delay_are_not_counted() -> None:
    turn = 0.05
    late_then_together = [turn, 4 * turn, 0.001, 0.001, 0.001, turn]
    assert short_gaps_not_made_up(late_then_together, turn) == []
    taken_twice = [turn, turn, 0.001, turn, 0.0, turn]
    assert short_gaps_not_made_up(taken_twice, turn) == [0.001, 0.0]


def test_rate_holds_across_workers_as_the_server_sees_it(
    redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    rate = 20.0
    with serve_site(slow_site(30, 0.0)) as server:
        url = server.url("/")
        outputs = [tmp_path / f"w{i}.jsonl" for i in range(3)]
        common = ["--redis", redis_server.url, "--crawl-id", crawl_id, "--rate", str(rate)]
        processes = [start_worker(url, *common, "-o", str(out)) for out in outputs]
        codes, _ = wait_all(processes)
        assert codes == [0, 0, 0]
        times = sorted(r.time for r in server.log if r.target != "/robots.txt")
    assert len(times) >= 25
    # As for Crawl-delay below: arrivals may come late through a loaded
    # machine and the next on time; the whole crawl keeps the rate.
    gaps = [b - a for a, b in itertools.pairwise(times)]
    unexplained = short_gaps_not_made_up(gaps, 1.0 / rate)
    assert len(unexplained) <= 2, (unexplained, sorted(gaps)[:5])
    assert times[-1] - times[0] >= 0.95 * (len(times) - 1) / rate, times
    per_worker = [len(records(out)) for out in outputs]
    assert sum(1 for n in per_worker if n) >= 2, per_worker  # shared, not one worker alone
    assert_consistent(redis_server, crawl_id)


def test_per_host_concurrency_holds_across_workers(
    redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    in_flight = 0
    peak = 0
    lock = threading.Lock()
    rng = random.Random(3)

    def route(request: Any) -> Response:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        time.sleep(0.02)
        with lock:
            in_flight -= 1
        links = [f"/p/{rng.randrange(60)}" for _ in range(4)]
        return page(*links)

    site = Site({"/robots.txt": Response(status=404)}, fallback=route)
    with serve_site(site) as server:
        url = server.url("/")
        outputs = [tmp_path / f"w{i}.jsonl" for i in range(3)]
        common = ["--redis", redis_server.url, "--crawl-id", crawl_id]
        processes = [
            start_worker(url, *common, "--per-host-concurrency", "2", "-o", str(out))
            for out in outputs
        ]
        codes, _ = wait_all(processes)
    assert codes == [0, 0, 0]
    assert peak == 2
    assert_consistent(redis_server, crawl_id)


def test_lost_redis_stops_the_workers_with_a_message(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    if redis_fixture.REDIS_SERVER is None:
        pytest.skip("redis-server is not installed")
    own = start_redis(tmp_path_factory.mktemp("lost"))
    try:
        with serve_site(slow_site(400, 0.02)) as server:
            out = tmp_path / "w.jsonl"
            worker = start_worker(
                server.url("/"), "--redis", own.url, "--crawl-id", "lost", "-o", str(out)
            )
            deadline = time.monotonic() + 30
            while len(records(out)) < 20 and time.monotonic() < deadline:
                time.sleep(0.05)
            own.process.kill()
            own.process.wait()
            _, stderr = worker.communicate(timeout=60)
    finally:
        if own.process.poll() is None:
            own.process.kill()
    assert worker.returncode == 75, stderr
    assert "lost the connection to Redis" in stderr
    assert "Run the same command again to resume once Redis is back" in stderr
    assert "Traceback" not in stderr


class AnswerGate:
    """Lets a site answer every request, or, after ``hold_after(n)``, ``n``
    more and then none until ``release()`` (60 s at most): a crawl cannot get
    past them, however fast it is."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._left: float = float("inf")
        self._released = threading.Event()

    def hold_after(self, answers: int) -> None:
        with self._lock:
            self._left = answers
            self._released.clear()

    def release(self) -> None:
        self._released.set()

    def around(self, site: Site) -> Site:
        def route(response: Any) -> Callable[[SiteRequest], Response]:
            def answer(request: SiteRequest) -> Response:
                with self._lock:
                    self._left -= 1
                    held = self._left < 0
                if held:
                    self._released.wait(60)
                return response(request) if callable(response) else response

            return answer

        return dataclasses.replace(site, routes={t: route(r) for t, r in site.routes.items()})


def test_a_stopped_worker_resumes_where_it_left_off(
    redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    gate = AnswerGate()
    with serve_site(gate.around(slow_site(200, 0.01))) as server:
        url = server.url("/")
        expected = {r["url"] for r in single_crawl(url, tmp_path, site="slow_site(200)")}
        out = tmp_path / "w.jsonl"
        args = [url, "--redis", redis_server.url, "--crawl-id", crawl_id, "-o", str(out)]
        gate.hold_after(40)  # the worker cannot finish before it is stopped
        worker = start_worker(*args)
        deadline = time.monotonic() + 30
        while len(records(out)) < 30 and time.monotonic() < deadline:
            time.sleep(0.05)
        worker.send_signal(signal.SIGINT)
        gate.release()  # the pages in flight finish: a graceful stop records them
        _, stderr = worker.communicate(timeout=60)
        assert worker.returncode == 130, stderr
        first = len(records(out))
        assert 30 <= first < len(expected)
        again = cli(*args)
        assert again.returncode == 0, again.stderr
    got = records(out)
    counts = Counter(r["url"] for r in got)
    assert set(counts) == expected
    assert [u for u, n in counts.items() if n > 1] == []  # a graceful stop puts pages back
    assert_consistent(redis_server, crawl_id)


def test_numbered_outputs() -> None:
    from trio_crawl.cli.redis_cli import numbered_output

    assert numbered_output("out.jsonl", 2) == "out.2.jsonl"
    assert numbered_output("dir/out", 1) == os.path.join("dir", "out.1")
    assert numbered_output(".hidden", 3) == ".hidden.3"
    assert numbered_output("a/crawl.warc.gz", 2) == os.path.join("a", "crawl.2.warc.gz")
    assert numbered_output(".warc.gz", 2) == ".warc.2.gz"


def test_crawl_delay_holds_across_workers_as_the_server_sees_it(
    redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    """Three workers, one host with a Crawl-delay, each answer taking
    ``answer`` s: one request at a time over all workers, each arriving at
    least the delay after the answer before it ended (so ``answer + delay``
    after the previous arrival), whatever came late on a loaded machine.
    Spaced between starts (as before), gaps were ``delay * 1.05``, and a late
    arrival could make one shorter than the delay."""
    delay, answer = 0.2, 0.1
    routes: dict[str, Any] = {
        "/": dataclasses.replace(page(*[f"/p/{i}" for i in range(12)]), delay=answer),
        "/robots.txt": Response(
            body=f"User-agent: *\nCrawl-delay: {delay}\n".encode(), content_type="text/plain"
        ),
    }
    for i in range(12):
        routes[f"/p/{i}"] = dataclasses.replace(page("/", f"/p/{(i + 1) % 12}"), delay=answer)
    with serve_site(Site(routes)) as server:
        url = server.url("/")
        outputs = [tmp_path / f"w{i}.jsonl" for i in range(3)]
        common = ["--redis", redis_server.url, "--crawl-id", crawl_id]
        processes = [start_worker(url, *common, "-o", str(out)) for out in outputs]
        codes, _ = wait_all(processes)
        assert codes == [0, 0, 0]
        times = sorted(r.time for r in server.log if r.target != "/robots.txt")
        robots = [r for r in server.log if r.target == "/robots.txt"]
    assert len(times) == 13
    assert len(robots) == 1
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(gap >= answer + delay for gap in gaps), sorted(gaps)[:5]
    assert_consistent(redis_server, crawl_id)


def test_a_killed_worker_run_again_takes_its_pages_back_at_once(
    redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    """The default lease is 30 s; the same command (same output file) run
    again after a SIGKILL gets the killed run's pages back without waiting."""
    with serve_site(slow_site(200, 0.02)) as server:
        url = server.url("/")
        expected = {r["url"] for r in single_crawl(url, tmp_path, site="slow_site(200)")}
        out = tmp_path / "w.jsonl"
        args = [url, "--redis", redis_server.url, "--crawl-id", crawl_id, "-o", str(out)]
        worker = start_worker(*args)
        deadline = time.monotonic() + 30
        while len(records(out)) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=30)
        started = time.monotonic()
        again = cli(*args, timeout=25)
        assert again.returncode == 0, again.stderr
        assert time.monotonic() - started < 20
    assert_consistent(redis_server, crawl_id)
    got = records(out)
    counts = Counter(r["url"] for r in got)
    assert set(counts) == expected
    for u, n in counts.items():
        if n > 1:
            assert sum(bool(r.get("refetched")) for r in got if r["url"] == u) >= n - 1


def test_processes_pass_a_signal_on_and_the_crawl_resumes(
    redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    gate = AnswerGate()
    with serve_site(gate.around(slow_site(200, 0.03))) as server:
        url = server.url("/")
        expected = {r["url"] for r in single_crawl(url, tmp_path, site="slow_site(200)")}
        out = tmp_path / "out.jsonl"
        args = [url, "--redis", redis_server.url, "--crawl-id", crawl_id, "-o", str(out)]
        gate.hold_after(40)  # the processes cannot finish before the signal
        parent = start_worker(*args, "--processes", "2")
        parts = [tmp_path / "out.1.jsonl", tmp_path / "out.2.jsonl"]
        deadline = time.monotonic() + 30
        while sum(len(records(p)) for p in parts) < 30 and time.monotonic() < deadline:
            time.sleep(0.05)
        parent.send_signal(signal.SIGINT)
        gate.release()
        _, stderr = parent.communicate(timeout=60)
        assert parent.returncode == 130, stderr
        assert "Traceback" not in stderr
        again = cli(*args, "--processes", "2")
        assert again.returncode == 0, again.stderr
    got = [r for p in parts for r in records(p)]
    counts = Counter(r["url"] for r in got)
    assert set(counts) == expected
    assert [u for u, n in counts.items() if n > 1] == []
    assert_consistent(redis_server, crawl_id)


def test_without_coredis_the_message_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['coredis'] = None\n"
        "from trio_crawl.cli.main import main\n"
        "main(['http://127.0.0.1:1/', '--redis', 'redis://127.0.0.1:1/0', '--crawl-id', 'x'])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT
    )
    assert result.returncode == 2
    assert result.stderr == (
        "trio-crawl: error: --redis needs the coredis package: pip install 'trio-crawl[redis]'\n"
    )


# -- integrity: what Redis may do to a crawl ----------------------------------------


def assert_consistent(server: RedisServer, name: str) -> None:
    """The crawl's counters agree with its keys, and no URL is in two places."""
    import trio

    from trio_crawl.frontiers.redis import check_crawl

    assert trio.run(check_crawl, server.url, name) == []


def error_lines(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr
    return [line for line in stderr.splitlines() if line]


own_redis = redis_fixture.own_redis


def wait_for_records(paths: Sequence[Path], n: int) -> None:
    deadline = time.monotonic() + 30
    while sum(len(records(p)) for p in paths) < n and time.monotonic() < deadline:
        time.sleep(0.02)


def test_flushall_mid_crawl_stops_every_worker_and_nobody_says_done(
    own_redis: Any, tmp_path: Path
) -> None:
    redis = own_redis()
    hold = threading.Event()  # /hold answers after the FLUSHALL: the crawl cannot end first
    with serve_site(slow_site(400, 0.02, hold)) as server:
        url = server.url("/")
        outputs = [tmp_path / f"w{i}.jsonl" for i in range(2)]
        common = ["--redis", redis.url, "--crawl-id", "flushed", "-q", "--lease", "3"]
        processes = [start_worker(url, *common, "-o", str(out)) for out in outputs]
        for out in outputs:  # both are in the crawl
            wait_for_records([out], 10)
        assert redis.command("FLUSHALL") == "+OK"
        hold.set()
        codes, _ = wait_all(processes)
        stderrs = [p.stderr.read() for p in processes]  # type: ignore[union-attr]
    assert codes == [75, 75], stderrs
    for stderr in stderrs:
        (line,) = error_lines(stderr)
        assert line.startswith("trio-crawl: error: crawl 'flushed' is no longer in Redis at ")
        assert line.endswith("It cannot be resumed: start it again (with its URLs) to crawl anew")
    assert sum(len(records(out)) for out in outputs) < 400  # stopped, not "done"
    status = cli("--redis", redis.url, "--crawl-id", "flushed", "--status")
    assert status.returncode == 2
    assert "done" not in status.stdout + status.stderr
    assert "no crawl 'flushed'" in status.stderr


def test_a_server_that_may_evict_keys_is_refused_at_the_start(
    own_redis: Any, tmp_path: Path
) -> None:
    redis = own_redis("--maxmemory-policy", "allkeys-lru")
    for extra in ([], ["--processes", "2"]):
        result = cli(
            "http://127.0.0.1:1/", "--redis", redis.url, "--crawl-id", "lru",
            "-o", str(tmp_path / "out.jsonl"), *extra,
        )  # fmt: skip
        assert result.returncode == 2, result.stderr
        (line,) = error_lines(result.stderr)
        assert "may evict keys (maxmemory-policy allkeys-lru)" in line
        assert "noeviction" in line
    assert redis.command("EXISTS", "tc:{lru}:m") == ":0"  # nothing created


@pytest.mark.parametrize("processes", [None, 2])
def test_an_error_reply_mid_crawl_is_one_line_and_exit_75(
    own_redis: Any, tmp_path: Path, processes: int | None
) -> None:
    """Redis out of memory (maxmemory reached, noeviction): its OOM error
    replies stop each worker with one line, exit 75, without a traceback,
    and the password of the URL is not in it."""
    redis = own_redis(password="s3cret-pw")
    hold = threading.Event()  # /hold answers after the cap: the crawl cannot end first
    with serve_site(slow_site(400, 0.02, hold)) as server:
        out = tmp_path / "out.jsonl"
        args = [server.url("/"), "--redis", redis.url, "--crawl-id", "oom", "-q", "-o", str(out)]
        if processes:
            args += ["--processes", str(processes)]
            parts = [tmp_path / f"out.{i}.jsonl" for i in (1, 2)]
        else:
            parts = [out]
        worker = start_worker(*args)
        for part in parts:  # every worker is in the crawl: its refusal is mid-crawl
            wait_for_records([part], 10)
        assert redis.command("CONFIG", "SET", "maxmemory", "1") == "+OK"
        hold.set()
        _, stderr = worker.communicate(timeout=60)
    assert worker.returncode == 75, stderr
    lines = error_lines(stderr)
    assert len(lines) == (processes or 1), stderr
    for line in lines:
        # --processes hands the password to its workers in their environment:
        # their URL has only the user name (masked too: it may be a token).
        where = "redis://***@" if processes else "redis://default:***@"
        assert line.startswith(f"trio-crawl: error: Redis at {where}127.0.0.1:")
        assert "refused a call mid-crawl (OOM command not allowed" in line
        assert line.endswith("a rerun starts the crawl anew and fetches every page again")
    assert "s3cret-pw" not in stderr
    assert_consistent(redis, "oom")  # refused calls changed nothing half-way


def test_a_worker_frozen_past_its_lease_joins_again_and_says_so(
    own_redis: Any, tmp_path: Path
) -> None:
    """SIGSTOP a worker with a call in flight (Redis answers while it is
    frozen), for longer than its lease and than the call timeout: on thaw it
    reads that answer, learns its pages went to the other worker, says so
    in one line, joins again, and the crawl completes."""
    redis = own_redis()
    with serve_site(slow_site(400, 0.04)) as server:
        url = server.url("/")
        expected = {r["url"] for r in single_crawl(url, tmp_path, "-w", "8")}
        before = len(server.log)
        outputs = [tmp_path / f"w{i}.jsonl" for i in range(2)]
        common = ["--redis", redis.url, "--crawl-id", "frozen", "-w", "2", "--lease", "2"]
        processes = [start_worker(url, *common, "-o", str(out)) for out in outputs]
        victim = processes[0]
        wait_for_records(outputs[:1], 10)
        redis.process.send_signal(signal.SIGSTOP)  # the victim's next call stays in flight
        time.sleep(0.3)
        victim.send_signal(signal.SIGSTOP)
        redis.process.send_signal(signal.SIGCONT)  # it answers the frozen victim
        time.sleep(7)  # > --lease 2 and > the call timeout (5 s)
        victim.send_signal(signal.SIGCONT)
        codes, _ = wait_all(processes)
        stderrs = [p.stderr.read() for p in processes]  # type: ignore[union-attr]
        log = list(server.log[before:])
    assert codes == [0, 0], stderrs
    assert "lost the connection" not in stderrs[0]
    warnings = [line for line in error_lines(stderrs[0]) if "warning" in line]
    assert len(warnings) == 1, stderrs[0]
    assert "was silent longer than its lease (2 s" in warnings[0]
    assert "handed the" in warnings[0] and "it joined again as" in warnings[0]
    got = [r for out in outputs for r in records(out)]
    counts = Counter(r["url"] for r in got)
    assert set(counts) == expected
    # On thaw it fetches none of the pages Redis handed to the other worker:
    # the pages fetched twice are those it fetched before the freeze (their
    # finish not yet in Redis) or was fetching then (-w 2); the other worker
    # fetches them second, under a lease, and its record says so.
    twice = {u for u, n in counts.items() if n > 1}
    assert max(counts.values()) <= 2
    thawed = [r for r in records(outputs[0]) if r["url"] in twice and r["t"] >= 7.0]
    assert len(thawed) <= 2, thawed  # records of its own run's clock, after the 7 s freeze
    for u in twice:
        (first,) = [r for r in records(outputs[0]) if r["url"] == u]
        (second,) = [r for r in records(outputs[1]) if r["url"] == u]
        assert not first.get("refetched") and second.get("refetched") is True
    assert max(Counter(r.target for r in log).values()) <= 2  # as the server saw it
    assert_consistent(redis, "frozen")


def test_delete_crawl_removes_every_key_and_refuses_a_running_crawl(
    redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    with serve_site(slow_site(300, 0.1)) as server:
        url = server.url("/")
        out = tmp_path / "w.jsonl"
        args = ["--redis", redis_server.url, "--crawl-id", crawl_id]
        worker = start_worker(url, *args, "-w", "2", "-o", str(out))
        wait_for_records([out], 5)
        running = cli(*args, "--delete-crawl")
        assert running.returncode == 2
        assert f"crawl {crawl_id!r} is running (1 live workers)" in running.stderr
        worker.send_signal(signal.SIGINT)
        assert worker.wait(timeout=TIMEOUT) == 130
    assert_consistent(redis_server, crawl_id)  # stopped: at rest, not done
    assert redis_server.command("EXISTS", f"tc:{{{crawl_id}}}:m") == ":1"
    deleted = cli(*args, "--delete-crawl")
    assert deleted.returncode == 0, deleted.stderr
    assert f"deleted crawl {crawl_id!r}" in deleted.stderr
    assert redis_server.command("KEYS", f"tc:{{{crawl_id}}}:*") == "*0"
    status = cli(*args, "--status")
    assert status.returncode == 2
    assert "no crawl" in status.stderr


def test_a_password_in_the_redis_url_is_never_printed() -> None:
    from trio_crawl.frontiers.redis import redact_url

    port = redis_fixture.free_port()
    result = cli(
        "http://127.0.0.1:1/", "--redis", f"redis://me:pa55word@127.0.0.1:{port}/0",
        "--crawl-id", "x",
    )  # fmt: skip
    assert result.returncode == 2
    assert "pa55word" not in result.stderr
    assert f"cannot connect to Redis at redis://me:***@127.0.0.1:{port}/0" in result.stderr
    assert redact_url("redis://:pw@host:6379/2") == "redis://:***@host:6379/2"
    assert redact_url("rediss://u:p%40ss@[::1]:6380/0") == "rediss://u:***@[::1]:6380/0"
    assert redact_url("redis://host:6379/0") == "redis://host:6379/0"
    assert redact_url("unix://u:pw@/tmp/redis.sock?db=1") == "unix://u:***@/tmp/redis.sock?db=1"


def test_a_server_that_starts_evicting_mid_crawl_stops_the_workers(
    own_redis: Any, tmp_path: Path
) -> None:
    redis = own_redis()
    with serve_site(slow_site(400, 0.03)) as server:
        out = tmp_path / "w.jsonl"
        worker = start_worker(
            server.url("/"), "--redis", redis.url, "--crawl-id", "lru", "-q", "--lease", "3",
            "-w", "2", "-o", str(out),
        )  # fmt: skip
        wait_for_records([out], 10)
        assert redis.command("CONFIG", "SET", "maxmemory-policy", "allkeys-lru") == "+OK"
        _, stderr = worker.communicate(timeout=30)  # the next heartbeat looks: 1 s
    assert worker.returncode == 75, stderr
    (line,) = error_lines(stderr)
    assert "now evicts keys (maxmemory-policy allkeys-lru)" in line
    assert len(records(out)) < 400
