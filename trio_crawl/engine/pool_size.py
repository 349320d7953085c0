"""The crawl's ``WorkPool``: pinned by ``workers``, or sized by a ``PoolSizer``.

With ``CrawlConfig.workers`` set the pool has exactly that many tokens. Left
at None (the default) the pool starts at ``initial_workers`` and a
``PoolSizer`` moves its ``total_tokens`` within ``worker_ceiling`` (the
user's ``max_workers`` and the machine's descriptor and memory limits),
from the process's CPU time, the event loop's lag and the busy workers
(core/pool_sizing.py has the rules).
"""

from __future__ import annotations

from collections.abc import Callable

from ..core.config import CrawlConfig
from ..core.frontier import Entry
from ..core.pool_sizing import SAMPLE_SECONDS, PoolSizer, PoolSizerSettings
from ..workpool import WorkPool


def sized_pool(
    config: CrawlConfig,
    on_take: Callable[[int], None],
    ceiling: Callable[[], float],
    on_resize: Callable[[float, int], None],
) -> WorkPool[Entry]:
    """The pool for ``config``: ``on_take`` refills a disk frontier, ``ceiling``
    says what the work can use now, ``on_resize`` hears every new size."""
    sizer = None
    if config.pool.workers is None:
        top = config.worker_ceiling
        start = config.initial_workers
        sizer = PoolSizer(PoolSizerSettings(max_workers=top, floor=start, initial=start))
    return WorkPool[Entry](
        config.initial_workers,
        grace=config.pool.grace,
        on_take=on_take,
        sizer=sizer,
        sample_seconds=SAMPLE_SECONDS,
        ceiling=ceiling,
        on_resize=on_resize,
    )
