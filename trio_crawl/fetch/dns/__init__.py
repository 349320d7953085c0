"""Host names looked up once per crawl, for the fetchers whose library
resolves every new connection on its own (httpx; libcurl has its own cache).

    name_cache.py  pure: which lookup to make, what to keep and for how
                   long, and who waits for whom (no trio, no sockets)
    resolve.py     the trio side: ``CachingResolver`` runs the lookups off the
                   event loop, ``connect_first`` races a name's addresses

``tests/test_layering.py`` holds ``name_cache`` to core's rules.
"""
