"""Frontier backends: where a crawl's URLs live between discovery and record.

Every backend implements ``FrontierBackend`` (``base``): in memory, or in a
SQLite file that survives the process (``--state``). Backends never import the
engine; the engine talks to them only through the protocol.

Two pure modules serve the backends alone: ``bloom`` (the in-memory filters
in front of the SQLite seen set) and ``crawl_identity`` (the settings a
stored crawl must keep to be resumed or joined).
"""
