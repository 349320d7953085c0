"""The command line's identity options: headers, cookies, basic auth, proxy.

Their flags are in the option table (``cli/option_table.py``);
``identity_options`` turns them into ``CrawlConfig`` options (reading the
cookie file), raising ``ConfigError`` with a one-line message that never quotes a secret;
``save_cookies`` writes the jar back at the end (``--save-cookies``). The
rules themselves are in ``core.identity``, ``core.proxy`` and ``fetch.identity``.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from ..core.config import CrawlOptions
from ..core.identity import parse_header
from ..errors import ConfigError

if TYPE_CHECKING:
    from http.cookiejar import CookieJar

    from ..fetch.cookies import CrawlCookieJar

__all__ = ["identity_options", "load_cookies", "save_cookies"]


def identity_options(args: argparse.Namespace) -> CrawlOptions:
    """The CrawlConfig options of ``add_identity_options``; reads the cookie file."""
    options: CrawlOptions = {}
    try:
        options["headers"] = tuple(parse_header(text) for text in args.header)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if (args.user is None) != (args.password is None):
        raise ConfigError("--user and --password go together (or use --netrc)")
    if args.user is not None:
        options["auth"] = (args.user, args.password)
    netrc = "--netrc-file" if args.netrc_file else "--netrc" if args.netrc else None
    if args.user is not None and netrc:  # the library would take --user's and ignore the file
        raise ConfigError(f"--user and {netrc} both give the credentials: keep one of them")
    basic_auth = "--user" if args.user is not None else "--netrc" if args.netrc else None
    if args.netrc_file:
        basic_auth = basic_auth or "--netrc-file"
    if basic_auth and any(name.lower() == "authorization" for name, _ in options["headers"]):
        # One would silently replace the other (curl sends the header, httpx the auth).
        raise ConfigError(
            f"-H 'Authorization: ...' and {basic_auth} both give the credentials: keep one of them"
        )
    if args.netrc_file or args.netrc:
        options["netrc_file"] = args.netrc_file or os.path.expanduser("~/.netrc")
    if args.cookies or args.save_cookies:
        options["cookies"] = load_cookies(args.cookies)
    options["proxy"] = args.proxy
    return options


def load_cookies(path: str | None) -> CrawlCookieJar:
    """A jar with the cookies of a Netscape cookie file (session cookies too,
    whether their expiry is empty or 0, as curl and wget write them; expired
    ones dropped); empty for ``None``."""
    # Imported here: http.cookiejar and urllib.request are for crawls with cookies only.
    from http.cookiejar import LoadError

    from ..fetch.cookies import CrawlCookieJar

    jar = CrawlCookieJar()
    if path is None:
        return jar
    try:
        jar.load(path, ignore_discard=True, ignore_expires=True)
    except (LoadError, UnicodeDecodeError):  # its message quotes a line: a cookie, maybe
        raise ConfigError(f"--cookies {path}: not a Netscape cookie file") from None
    except OSError as exc:
        raise ConfigError(f"cannot read cookie file {path!r}: {exc.strerror or exc}") from None
    for cookie in jar:
        if cookie.expires == 0:  # curl and wget write session cookies so
            cookie.expires, cookie.discard = None, True
    jar.clear_expired_cookies()
    return jar


def save_cookies(jar: CookieJar | None, path: str | None) -> str | None:
    """Write the crawl's cookies (``--save-cookies``); a message on failure."""
    if jar is None or path is None:
        return None
    from http.cookiejar import MozillaCookieJar  # loaded already: the jar is a CookieJar

    if not isinstance(jar, MozillaCookieJar):
        return None
    try:
        jar.save(path, ignore_discard=True)
    except OSError as exc:
        return f"cannot write cookie file {path!r}: {exc.strerror or exc}"
    return None
