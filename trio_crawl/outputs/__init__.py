"""Archival outputs that sit beside the JSON Lines records.

``warc``: ``WarcWriter`` writes what was fetched as a WARC 1.1 file, one gzip member
per record (``--warc FILE.warc.gz``). Writers here are synchronous and do plain file
I/O, so the engine can call them from a crawler task or hand them to a thread; none
of them imports trio.
"""
