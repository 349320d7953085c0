"""The pure core: decisions and bookkeeping with no I/O.

URL canonicalization and scope, the frontier (seen set, depth, budgets,
unfinished work), the politeness schedule, retry and robots policies, sitemap
and link parsing, the outcome of one fetch, and the data models. Nothing here
imports trio, an HTTP client, rich or sqlite3 (a layering check in CI holds it
to that), so every rule can be driven by tests directly and by hypothesis.
"""
