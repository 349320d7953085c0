"""What this machine lets one crawl process serve, read from the operating system.

The rules that turn limits into a worker count are pure and live with the
pool's sizing rules (``core/pool_sizing.py``: ``descriptor_ceiling``,
``memory_ceiling``); this module only reads the limits they need, the soft
``RLIMIT_NOFILE`` and the memory available (``/proc/meminfo``, else all
physical memory), so that core stays free of I/O. Standard library only: the
command line and the crawl's configuration ask it without loading anything.
"""

from __future__ import annotations

import math
import os

from .core.pool_sizing import descriptor_ceiling, memory_ceiling


def available_memory() -> float:
    """Bytes of memory available to new allocations (Linux ``MemAvailable``;
    else all physical memory; inf if unknown)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return float(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return math.inf


def machine_ceiling() -> tuple[int, str]:
    """The most workers this process can serve, and which limit says so
    (``"ulimit -n 1024"`` or ``"memory 3.2 GB available"``)."""
    soft: float = math.inf
    try:
        import resource

        value = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        soft = math.inf if value == resource.RLIM_INFINITY else value
    except (ImportError, OSError):  # pragma: no cover - Windows
        pass
    available = available_memory()
    by_fds, by_memory = descriptor_ceiling(soft), memory_ceiling(available)
    if by_fds <= by_memory:
        return by_fds, f"ulimit -n {soft:g}"
    return by_memory, f"{available / 1e9:.1f} GB of memory available"
