"""The command line: ``trio-crawl`` (``main``), its progress display, ``demo``.

``units`` (pure) reads the sizes, counts and durations its options take."""
