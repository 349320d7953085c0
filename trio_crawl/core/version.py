"""The package's version, where every layer may import it (the face
re-exports it as ``trio_crawl.__version__``)."""

VERSION = "0.1.0"
