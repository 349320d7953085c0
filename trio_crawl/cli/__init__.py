"""The command line: ``trio-crawl`` (``main``), its progress display, ``demo``."""
