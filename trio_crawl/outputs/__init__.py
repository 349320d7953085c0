"""Where a crawl's results go, for the CLI and the library alike.

``jsonl``: records and items as JSON Lines (or CSV) files, each line written
whole at once (``OutputFile``, ``JsonLinesWriter``). ``warc``: ``WarcWriter``
writes what was fetched as a WARC 1.1 file, one gzip member per record;
``warc_process`` runs it in a child process, and ``archive`` is the trio
side of that process (``open_crawl_archive``: a page's record waits until
its exchange is on disk), used by ``--warc`` and by the library's ``warc=``.
Only ``archive`` imports trio; none of them imports an HTTP client, the
engine or the frontiers.
"""
