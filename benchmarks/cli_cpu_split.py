"""Run the ``trio-crawl`` CLI in this process and append, at exit, its own CPU
time and that of its reaped children (the parse co-process) to a log.

    env CPU_SPLIT_LOG=/tmp/split.log CPU_SPLIT_TAG=on python benchmarks/cli_cpu_split.py URL ...

``realsite.py`` and ``run.py`` read a crawl's CPU with ``wait4``, which adds the
children it reaped; as their ``--trio-crawl-cmd`` this wrapper tells the two apart.
Peak RSS of the children is ``ru_maxrss`` (Linux carries the parent's RSS at
``fork`` into it, so it overstates a small child: read /proc/PID/status VmHWM for
the child's own).
"""

from __future__ import annotations

import atexit
import os
import resource
import runpy
import sys


def report() -> None:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.environ["CPU_SPLIT_LOG"], "a") as log:
        print(
            f"{os.environ.get('CPU_SPLIT_TAG', '')} main CPU {own.ru_utime + own.ru_stime:.3f} s,"
            f" children CPU {children.ru_utime + children.ru_stime:.3f} s,"
            f" main RSS {own.ru_maxrss / 1024:.0f} MB,"
            f" children RSS {children.ru_maxrss / 1024:.0f} MB",
            file=log,
        )


if __name__ == "__main__":
    atexit.register(report)
    sys.argv = ["trio_crawl", *sys.argv[1:]]
    runpy.run_module("trio_crawl", run_name="__main__", alter_sys=True)
