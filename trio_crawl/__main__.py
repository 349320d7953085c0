"""``python -m trio_crawl`` is ``trio-crawl``; ``run`` is also its console script.

Loading the crawler's modules takes a good part of a second on a slow
machine, and Ctrl-C meanwhile would end in a KeyboardInterrupt traceback:
``run`` imports the command line inside a ``try``. That works because
``import trio_crawl`` itself loads nothing heavy (its names are imported on
first use), so nothing slow runs before the ``try``.

When the command is done, ``run`` ends the process without Python's
finalization (``exit_now``): tearing down trio, lxml, ssl and the rest takes
~30 ms of CPU (11 ms for trio alone), 7 % of a 1,000-page crawl on
127.0.0.1, and nothing of it is the user's. By then every output is closed;
the ``atexit`` handlers still run (logging's flush, a profiler's or
coverage's report) and stdout and stderr are flushed. A non-daemon thread
still running gets the ordinary exit, which waits for it, and so does a run
with a ``--handler``: user code may leave a file open for the teardown to
flush.

While the command line's modules load, the garbage collector is off: those
imports make tens of thousands of long-lived objects (classes, functions,
trio and its attrs classes) and no garbage worth a pass, and the collector's
~60 passes over them cost ~10 ms of CPU, ~5 % of the loading. They are then
frozen (``gc.freeze``: moved out of the generations a pass looks at) before
the collector is on again, so no later pass walks them either; an ordinary
exit unfreezes them first, for the teardown to collect them as before.
"""

from __future__ import annotations

import sys
from typing import NoReturn

#: ``cli.main.main``'s own exit for a Ctrl-C before the crawl (130, one line).
INTERRUPTED = "trio-crawl: error: interrupted before the crawl started\n"


def run() -> NoReturn:
    if sys.argv[1:] == ["--version"]:  # answered before the crawler's modules load
        from .core.version import VERSION

        sys.stdout.write(f"trio-crawl {VERSION}\n")
        sys.exit(0)
    import gc

    collecting = gc.isenabled()
    gc.disable()
    try:
        from .cli.main import main
    except KeyboardInterrupt:
        sys.stderr.write(INTERRUPTED)
        sys.exit(130)
    else:
        gc.freeze()
    finally:
        if collecting:
            gc.enable()
    try:
        main()
    except SystemExit as exc:
        if isinstance(exc.code, int | None) and may_exit_now():
            exit_now(exc.code or 0)
        raise
    finally:  # the ordinary exit: its teardown collects them as it always did
        gc.unfreeze()


def may_exit_now() -> bool:
    """Whether no thread but daemons is left (an ordinary exit waits for the
    others), and no ``--handler`` was imported (its files, written and never
    closed, would be flushed by the teardown alone)."""
    import threading

    options = sys.modules.get("trio_crawl.cli.handlers")
    if options is not None and getattr(options, "LOADED_HANDLERS", None):
        return False
    main_thread = threading.main_thread()
    return all(t is main_thread or t.daemon for t in threading.enumerate())


def exit_now(code: int) -> NoReturn:
    """Run the ``atexit`` handlers, flush stdout and stderr, and end the
    process with ``code``, skipping the teardown of modules."""
    import atexit
    import contextlib
    import os

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing to save
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
