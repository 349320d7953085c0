"""``python -m trio_crawl`` is ``trio-crawl``."""

from ._cli import main

if __name__ == "__main__":
    main()
