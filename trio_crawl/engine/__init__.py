"""The trio layer: the crawl engine built on ``WorkPool``, the robots gate,
handlers, outputs, and the library entry points (``open_crawler``).

The pure rules only the engine uses live here too, beside their trio side,
and import no trio (``tests/test_layering.py`` checks each): ``schedule``
(the politeness schedule; ``fifo``, its per-host queue) for ``politeness``,
``outcome`` (what one fetch's result means) for ``crawler``, ``sitemap_parse``
for ``sitemaps``, ``distinct`` (a page's distinct links) for ``pages``."""
