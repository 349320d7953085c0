"""trio_crawl: a Trio-native web crawler."""

__version__ = "0.1.0"
