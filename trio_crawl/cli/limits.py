"""The machine's limits as the command line meets them: ``-w N`` clamped
to what the descriptor limit and memory can serve, and the worker ceiling
the latency hint keeps within half the descriptor limit. Read here, when
the command starts, never when a ``CrawlConfig`` is made."""

from __future__ import annotations

from ..machine import machine_ceiling
from .common import say

__all__ = ["pinned_workers", "workers_within_fd_limit"]


def pinned_workers(workers: int | None) -> int | None:
    """``-w N`` as given, or clamped (with a one-line warning) to what the
    descriptor limit and memory can serve: a million workers would need a
    million sockets."""
    if workers is None or workers < 1:
        return workers
    most, why = machine_ceiling()
    if workers > most:
        too_many = f"-w {workers:,} is more than this machine can serve ({why})"
        say(f"warning: {too_many}: using -w {most:,}")
        return most
    return workers


def workers_within_fd_limit(ceiling: int = 512) -> int:
    """Half the soft descriptor limit (a socket per worker, room for the rest), at most
    ``ceiling``: the most workers the latency-bound hint suggests."""
    try:
        import resource
    except ImportError:  # Windows
        return ceiling
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return ceiling if soft == resource.RLIM_INFINITY else max(16, min(ceiling, soft // 2))
