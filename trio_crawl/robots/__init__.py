"""robots.txt (RFC 9309), the pure part: what a file says and what it decides.

    rules.py    a robots.txt file parsed and matched, as Google's reference
                parser reads it
    policy.py   one origin's decision: the robots.txt URL, each HTTP answer
                interpreted (redirects, 4xx, 5xx, size), the group for our
                product token

No trio and no I/O here, so every rule is tested on plain values. The I/O
stays with its users: the engine's ``RobotsCache`` (``engine/robots_gate.py``)
fetches each origin's file once and shares it among the crawl's tasks, and the
Redis frontier shares the response among workers. Both need what sits above
this package (the fetch layer's ``Fetcher``, the engine's tasks, Redis), while
the fetch layer (the Chromium fetcher) and the demo site use the policy: so
the package stays at core's level, below all of them.
"""
