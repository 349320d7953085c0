"""The SQLite frontier (``--state``): one crawl in a file it can resume from.

The package face. Its modules, one job each:

``frontier.py``      ``SqliteFrontier`` (the backend face): the memory window, depth corrections
``disk_backlog.py``  the trio side: every call to the file in one worker thread, offers batched
``resume.py``        preparing a crawl before the loop starts: resume, reconcile, ``--status``
``state.py``         ``CrawlState``, the file's face, and the rules every module keeps
``connection.py``    opening the file, one thread at a time, disk failures told as such
``lock.py``          one crawl per file (``flock``)
``schema.py``        the tables, the checks on opening, the settings, durability
``books.py``         what memory keeps in step with the file, and that transaction
``counts.py``        rows in each state (rule 4)
``seen.py``          the seen-filter: recent set, Bloom filter, lookups (rule 6)
``marks.py``         Admit, Start and Finish ops, and how a batch is applied (rules 1-3)
``disk_queue.py``    seeds in, the oldest queued rows out to memory (rule 5)
``offering.py``      an offer: admission at the shortest depth, and lowering (rule 7)
``hosts.py``         per-host budgets, counted in the ``hosts`` table (rule 8)
``recovery.py``      after a stop: recorded URLs marked done, the rest queued again

Layers inside the package: ``frontier.py`` -> ``disk_backlog.py`` (trio) and
``resume.py`` -> ``state.py`` -> the synchronous modules below it (SQLite and
file I/O; no trio, no clock).
"""

from __future__ import annotations

from .disk_backlog import DiskBacklog
from .disk_queue import Row
from .frontier import DEFAULT_WINDOW, SqliteFrontier
from .marks import Admit, Finish, Op, Start
from .offering import Lowered, Offered
from .schema import State
from .seen import StateStatistics
from .state import CrawlState

__all__ = [
    "DEFAULT_WINDOW",
    "Admit",
    "CrawlState",
    "DiskBacklog",
    "Finish",
    "Lowered",
    "Offered",
    "Op",
    "Row",
    "SqliteFrontier",
    "Start",
    "State",
    "StateStatistics",
]
