"""``python -m trio_crawl`` is ``trio-crawl``."""

from .cli.main import main

if __name__ == "__main__":
    main()
