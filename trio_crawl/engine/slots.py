"""The crawl's host slots, with a rendering fetcher's browser requests under
the same schedule.

Its own module: ``engine/render.py`` builds on ``politeness.HostSlots``, and is
imported only by a crawl that renders (so that a plain crawl never loads
Chromium's code); ``politeness`` therefore cannot import it, even lazily
(``tests/test_layering.py``: no import cycle, lazy ones included).
"""

from __future__ import annotations

from collections.abc import Callable

from ..fetch.base import Fetcher
from .politeness import HostSlots, ScheduleRoom
from .statistics import is_rendering

__all__ = ["host_slots"]


def host_slots(
    schedule: ScheduleRoom, fetcher: Fetcher, crawl_delay: Callable[[str, float | None], None]
) -> HostSlots:
    """The slots of a crawl on ``schedule``; a rendering fetcher's browser
    requests are put under the same schedule (``engine/render.py``,
    imported only by a crawl that renders), and the Crawl-delay of a host
    only they reach is applied by ``crawl_delay(host, delay)``."""
    slots = HostSlots(schedule)
    if is_rendering(fetcher):
        from .render import attach_render

        attach_render(fetcher, schedule, slots, crawl_delay)
    return slots
