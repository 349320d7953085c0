"""``python -m trio_crawl`` is ``trio-crawl``; ``run`` is also its console script.

Loading the crawler's modules takes a good part of a second on a slow
machine, and Ctrl-C meanwhile would end in a KeyboardInterrupt traceback:
``run`` imports the command line inside a ``try``. That works because
``import trio_crawl`` itself loads nothing heavy (its names are imported on
first use), so nothing slow runs before the ``try``.
"""

from __future__ import annotations

import sys
from typing import NoReturn

#: ``cli.main.main``'s own exit for a Ctrl-C before the crawl (130, one line).
INTERRUPTED = "trio-crawl: error: interrupted before the crawl started\n"


def run() -> NoReturn:
    try:
        from .cli.main import main
    except KeyboardInterrupt:
        sys.stderr.write(INTERRUPTED)
        sys.exit(130)
    main()


if __name__ == "__main__":
    run()
