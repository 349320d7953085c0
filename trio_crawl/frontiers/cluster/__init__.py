"""A crawl on a Redis Cluster (issue #37, part B).

``connect``      the ``redis+cluster://`` URL, the cluster client (retries only
                 what the cluster says did not run), telling a cluster node
                 from a lone server, every primary's eviction policy
``termination``  the termination protocol's shard side (``termination.lua``),
                 groundwork for a crawl sharded by host; its model and
                 detector are pure, in ``core/shard_termination.py``, and the
                 argument is in docs/termination.md ("Across shards")

Today a crawl's keys share one hash tag, so one crawl lives in one slot of
the cluster and runs the one-Redis library unchanged (``frontiers/redis``).
"""
