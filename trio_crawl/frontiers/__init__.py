"""Frontier backends: where a crawl's URLs live between discovery and record.

Every backend implements ``FrontierBackend`` (``base``): in memory, or in a
SQLite file that survives the process (``--state``). Backends never import the
engine; the engine talks to them only through the protocol.
"""
