"""Groundwork for a frontier sharded over a Redis Cluster (issue #37, part B).

Only the termination protocol's shard side is here so far
(``termination``, with its Lua library ``termination.lua``); the protocol's
model and its detector are pure, in ``core/shard_termination.py``, and the
argument is in docs/termination.md ("Across shards").
"""
