"""The Redis frontier as a package (its modules: see frontier.py)."""

from .frontier import *  # noqa: F403
from .frontier import check_crawl, delete_crawl, keys_prefix, redact_url  # noqa: F401
