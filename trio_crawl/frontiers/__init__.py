"""Frontier backends: where a crawl's URLs live between discovery and record.

Every backend implements ``FrontierBackend`` (``base``): in memory, or in a
SQLite file that survives the process (``--state``). Backends never import the
engine; the engine talks to them only through the protocol.

``cluster`` is groundwork for a frontier sharded over a Redis Cluster (the
termination protocol's shard side), not a backend yet.

Two pure modules serve the backends alone: ``bloom`` (the in-memory filters
in front of the SQLite seen set) and ``crawl_identity`` (the settings a
stored crawl must keep to be resumed or joined).
"""
