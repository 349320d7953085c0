"""How the benchmarks measure a process and print what they found: one copy for all.

Every comparison here runs each tool as a child process, started as a user starts
it, so a figure is that child's own: wall time from spawn to reap, CPU time and peak
RSS from ``os.wait4`` (the child's rusage, not the runner's nor a sibling's). What
``wait4`` cannot say is read from ``/proc``, here rather than in each script: the
peak of a child forked from a runner bigger than it (Linux starts ``ru_maxrss`` at
the parent's size), the CPU of a process that is not ours to reap (nginx, a
browser's tree), and what other programs took from the machine meanwhile (the
benchmark machines are shared, and a figure without its load misleads).

Linux only, as the benchmarks are; where ``/proc`` is missing the extras read 0.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

# --- one child process ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Measured:
    """How one child process ran: its own rusage, not the runner's nor a sibling's."""

    exit_code: int | None  # None when it was killed for the timeout
    wall_s: float
    cpu_s: float  # user + system
    peak_rss_mb: float
    timed_out: bool


def run_measured(
    command: Sequence[str],
    *,
    timeout: float | None,
    log_path: Path | None = None,
    on_spawn: Callable[[int], None] | None = None,
    env: dict[str, str] | None = None,
    sample_peak: bool = False,
) -> Measured:
    """Run ``command`` with stdout/stderr to ``log_path`` (None: discarded); measure
    it; kill it after ``timeout`` seconds (None: never).

    ``on_spawn(pid)`` is called once the child exists (broad.py starts a sampler of its
    descriptors there).

    ``sample_peak``: also sample the child's ``VmHWM`` every 10 ms, and report that
    when ``ru_maxrss`` is no more than this process's own peak. Linux carries the
    parent's RSS over ``fork`` into the child's ``ru_maxrss``, so a small tool (wget)
    started by a big runner would otherwise show the runner's size. Only samples taken
    while the pid is still the child itself count (a recycled pid is not).

    A thread blocks in ``os.wait4`` so the wall time stops at the exit, not at a polling
    tick. On timeout the whole process group gets SIGTERM, then SIGKILL 5 s later (the
    leader is not reaped yet, so the group id is still the child's).
    """
    parent_kib = status_kib("self", "VmHWM") or 0
    samples: list[int] = []
    stop_sampling = threading.Event()

    def sample(pid: int) -> None:
        while not stop_sampling.wait(0.01):
            hwm = status_kib(pid, "VmHWM")
            if hwm is not None and status_kib(pid, "Tgid") == pid:
                samples.append(hwm)

    reaped: dict[str, Any] = {}
    end_children_on_sigterm()
    with contextlib.ExitStack() as stack:
        log = stack.enter_context(log_path.open("wb")) if log_path else subprocess.DEVNULL
        start = time.perf_counter()
        proc = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
        stack.callback(stop_sampling.set)
        if sample_peak:
            threading.Thread(target=sample, args=(proc.pid,), daemon=True).start()
        if on_spawn is not None:
            on_spawn(proc.pid)

        done = threading.Event()

        def reap() -> None:
            _pid, status, usage = os.wait4(proc.pid, 0)
            reaped["wall"] = time.perf_counter() - start
            reaped["status"] = status
            reaped["usage"] = usage
            done.set()

        # An Event, not Thread.join: an interrupted join can mark a running thread as
        # stopped (CPython 3.11), and then Ctrl-C would leave the child running.
        threading.Thread(target=reap, daemon=True).start()
        try:
            timed_out = not done.wait(timeout)
        except BaseException:  # Ctrl-C: the child is in its own session, stop it too
            if not done.is_set():
                _killpg(proc.pid, signal.SIGKILL)
                done.wait(5)  # reaped before this runner exits, not left to init
            raise
        if timed_out:
            _killpg(proc.pid, signal.SIGTERM)
            if not done.wait(5):
                _killpg(proc.pid, signal.SIGKILL)
                done.wait()
        # No group kill after a normal exit: once the leader is reaped its group id could
        # belong to someone else.
    exit_code = os.waitstatus_to_exitcode(reaped["status"])
    proc.returncode = exit_code  # reaped by hand: tell Popen so it never waits again
    usage: resource.struct_rusage = reaped["usage"]
    measured = Measured(
        exit_code=None if timed_out else exit_code,
        wall_s=reaped["wall"],
        cpu_s=usage.ru_utime + usage.ru_stime,
        peak_rss_mb=usage.ru_maxrss / 1024,  # Linux: KiB
        timed_out=timed_out,
    )
    if sample_peak and samples and measured.peak_rss_mb * 1024 <= parent_kib:
        measured = dataclasses.replace(measured, peak_rss_mb=max(samples) / 1024)
    return measured


def end_children_on_sigterm() -> None:
    """Make SIGTERM unwind this runner as Ctrl-C does, so that it stops its
    children on the way out (``run_measured`` kills the tool it runs, the
    servers' ``finally`` blocks stop nginx, Python's server and redis-server).
    Each child runs in a session of its own, so that a Ctrl-C reaches only
    the runner, which then stops them in order; but by default SIGTERM ends
    a Python process without unwinding, and left them all running. Called
    by whatever starts such a child; a handler someone set is left alone,
    as is a runner outside the main thread (only it may set one)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _unwind)


def _unwind(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # the exit status a SIGTERM'd process has, in shells


def _killpg(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class FdSampler:
    """The peak number of open descriptors of one process, sampled every 20 ms."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, pid: int) -> None:
        self._thread = threading.Thread(target=self._run, args=(pid,), daemon=True)
        self._thread.start()

    def _run(self, pid: int) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, len(os.listdir(f"/proc/{pid}/fd")))
            except OSError:
                return
            self._stop.wait(0.02)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1)


# --- /proc: what wait4 does not say ----------------------------------------------------


def status_kib(pid: int | str, field: str) -> int | None:
    """A number of ``/proc/PID/status`` (``VmHWM``, ``VmRSS`` in KiB; ``Tgid``)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a running process (0.0 if it cannot be read)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        # after "(comm)": state ppid ... utime (field 14) stime (15)
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def process_tree(pid: int) -> set[int]:
    """``pid`` and every process below it (a browser and its helpers)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                ppid = int(stat.rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = {pid}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def machine_busy_s() -> float:
    """CPU seconds all CPUs have spent busy since boot (``/proc/stat``; 0.0 without it).

    Its change over a run, minus the run's own CPU, is what other programs took from
    the cores meanwhile."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return 0.0
    # cpu user nice system idle iowait irq softirq steal (guest is inside user)
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


# --- the context of a figure ----------------------------------------------------------


def machine_info() -> dict[str, Any]:
    """nproc, CPU model, memory, load: the context every figure needs."""
    model = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem_gib = "?"
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = f"{int(line.split()[1]) / 1024 / 1024:.1f}"
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_count": os.cpu_count(),
        "cpu_model": model,
        "mem_gib": mem_gib,
        "loadavg": os.getloadavg(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
    }


def machine_line(machine: dict[str, Any]) -> str:
    """The ``machine:`` line each benchmark prints first."""
    load = " ".join(f"{x:.2f}" for x in machine["loadavg"])
    return (
        f"machine: {machine['nproc']} CPUs ({machine['cpu_model']}), {machine['mem_gib']} GiB, "
        f"load {load}, Python {machine['python']}"
    )


# --- tables, rounds, outputs ----------------------------------------------------------------


def text_table(
    header: Sequence[str], rows: Iterable[Sequence[str]], left: Collection[int] = (0, -1)
) -> str:
    """A plain-text table with a rule under the header: the columns in ``left``
    (indexes, negative from the end: names, verdicts) aligned left, the figures right."""
    rows = [list(r) for r in rows]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lefts = {i % len(header) for i in left}

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i in lefts else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def alternating(names: Sequence[T], round_number: int) -> list[T]:
    """The order of round ``round_number`` (from 1): reversed every other round, so
    that no tool always goes first (a warm cache, a quieter machine)."""
    return list(names) if round_number % 2 else list(reversed(names))


def output_dir(keep: Path | None, prefix: str) -> contextlib.AbstractContextManager[str]:
    """Where a benchmark's runs write: ``keep`` (``--keep-output``, created, left
    behind to read), else a temporary directory removed at the end."""
    if keep is None:
        return tempfile.TemporaryDirectory(prefix=prefix)
    keep.mkdir(parents=True, exist_ok=True)
    return contextlib.nullcontext(str(keep))
