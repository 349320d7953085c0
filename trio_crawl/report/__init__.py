"""The crawl report: ``trio-crawl report crawl.jsonl -o report.html``.

``aggregate`` reads a JSON Lines output in one streaming pass into bounded
totals (pure: no plotting, no trio); ``html`` draws them with matplotlib
(the ``report`` extra) into one self-contained page; ``changes`` counts
what a recrawl's records say changed.
"""
