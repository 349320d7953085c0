"""The vocabulary every layer shares: pure decisions and bookkeeping, no I/O.

URL canonicalization and scope, URL filters, the frontier (seen set, depth,
budgets, unfinished work), the retry policy, link and page parsing, the
crawl's configuration, and the data models. Nothing here imports trio, an
HTTP client, rich or sqlite3 (a layering check in CI holds it to that), so
every rule can be driven by tests directly and by hypothesis.

A feature's pure rules that only one package uses live beside that package
instead, and ``tests/test_layering.py`` holds them to the same rules, module
by module: the politeness schedule, the outcome of a fetch and sitemap
parsing in ``engine/``; the Bloom filters and the crawl identity in
``frontiers/``; the name cache in ``fetch/dns/``; size and duration units in
``cli/``; the mirror's layout and links in ``mirror/``. robots.txt's rules,
which several layers use, are a package of their own (``robots/``).
"""
