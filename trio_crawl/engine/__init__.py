"""The trio layer: the crawl engine built on ``WorkPool``, the robots gate,
handlers, outputs, and the library entry points (``open_crawler``)."""
