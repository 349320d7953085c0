"""Which in-scope URLs a crawl follows: ``--include``, ``--exclude``,
``--no-parent``, ``--accept``, ``--reject``.

Scope says which *hosts* a crawl may visit; these filters narrow it to the
URLs the user wants there. They are judged on canonical URLs, once per link,
in the one place every admission passes through (``FilteredScope.allows``):
links, sitemap seeds, redirect targets and a handler's requests alike. The
crawl's own start URLs are not filtered (they define the crawl), nor the
chain of redirects that starts at one (``FilteredScope.judge_redirect``: an
``http://`` start URL that moves to ``https://`` must not end the crawl);
page requisites of a followed page are exempt too
(``FilteredScope.allows_unfiltered``: an image is part of its page, whatever
its URL looks like). The scope still judges all of these.

Rules (a URL is followed when all hold):

1. it matches at least one ``include`` pattern, or none is given;
2. it matches no ``exclude`` pattern (exclude wins over include);
3. with ``no_parent``: on a site a start URL is on, it lies in or below the
   directory of one of that site's start URLs (wget's ``--no-parent``). The
   directory of ``/a/b/`` and of ``/a/b/index.html`` is ``/a/b/``; of ``/a/b``
   it is ``/a/``. A site is a host and port, http and https on their default
   ports counting as one site (the upgrade redirect stays inside); a site no
   start URL is on (an ``allow_domains`` subdomain) is not restricted.

4. with ``accept`` (wget's ``-A``): its file name (below) ends with one of
   the suffixes, or matches one of the shell patterns, of the list;
5. with ``reject`` (wget's ``-R``): its file name ends with none of the
   suffixes, and matches none of the patterns, of that list.

Patterns are Python regular expressions, searched (``re.search``) anywhere in
the canonical URL, case-sensitively (write ``(?i)`` to ignore case).

Rules 4 and 5 are wget's: an entry with a shell wildcard (``*``, ``?``,
``[``) is a pattern matched (``fnmatch``, case-sensitive) against the whole
file name, any other entry a suffix (``pdf``, ``.tar.gz``). The file name
is the URL path's last segment, percent-decoded, without the query string.
As in wget, they do not apply where there is no file name (``/docs/``) nor
to an ``.html`` or ``.htm`` file name: those pages are still fetched and
read for links, so ``accept=["pdf"]`` walks the HTML pages to find the PDFs
(wget then deletes them; here they are recorded, as every URL tried is,
and with ``mirror=`` not kept on disk: ``file_list_allows``).

>>> f = UrlFilter(exclude=[r"\\?"], no_parent=True, start_urls=["http://h/a/b/"])
>>> f.allows("http://h/a/b/c/d.html"), f.allows("http://h/a/"), f.allows("http://h/a/b/?x")
(True, False, False)
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from urllib.parse import unquote

from ..errors import ConfigError
from .scope import Scope


def _compile(option: str, patterns: Iterable[str]) -> tuple[re.Pattern[str], ...]:
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            raise ConfigError(
                f"{option}: bad regular expression {pattern!r}: {exc}", option
            ) from None
    return tuple(compiled)


#: File names that accept/reject never judge (wget's ``has_html_suffix_p``).
HTML_SUFFIXES = (".html", ".htm")
_WILDCARDS = frozenset("*?[")


def suffix_list(entries: Iterable[str]) -> tuple[str, ...]:
    """Entries of ``--accept``/``--reject``: each value split at commas (as
    wget takes ``-A pdf,jpg``), blanks dropped, order kept, repeats once."""
    split = (part.strip() for entry in entries for part in entry.split(","))
    return tuple(dict.fromkeys(part for part in split if part))


def file_name(url: str) -> str:
    """The last segment of a canonical URL's path, percent-decoded, without
    the query string: what wget's ``-A``/``-R`` judge.

    >>> file_name("http://h/a/report%20v2.pdf?x=1"), file_name("http://h/a/")
    ('report v2.pdf', '')
    """
    path = _site_and_path(url)[1]
    return unquote(path[path.rfind("/") + 1 :])


def matches_file_list(name: str, entries: Sequence[str]) -> bool:
    """Whether ``name`` ends with a suffix, or matches a pattern, of ``entries``."""
    for entry in entries:
        if _WILDCARDS.isdisjoint(entry):
            if name.endswith(entry):
                return True
        elif fnmatch.fnmatchcase(name, entry):
            return True
    return False


def file_list_allows(name: str, accept: Sequence[str], reject: Sequence[str]) -> bool:
    """Rules 4 and 5 on a file name, with no exception for HTML: whether
    ``name`` matches ``accept`` (when given) and not ``reject``. What wget's
    ``-A``/``-R`` decide for a file it has saved (``mirror/output.py``).

    >>> file_list_allows("genindex.html", (), ("genindex*",))
    False
    """
    if accept and not matches_file_list(name, accept):
        return False
    return not (reject and matches_file_list(name, reject))


def _site_and_path(url: str) -> tuple[str, str]:
    """The site (``host[:port]``, the port only when not the scheme's default)
    and the path of a canonical http(s) URL (no fragment, default port
    dropped). String slicing, not parsing."""
    begin = url.find("://") + 3
    end = url.find("?", begin)
    if end < 0:
        end = len(url)
    slash = url.find("/", begin, end)
    if slash < 0:
        authority, path = url[begin:end], "/"
    else:
        authority, path = url[begin:slash], url[slash:end]
    return authority[authority.rfind("@") + 1 :], path


def parent_root(url: str) -> tuple[str, str]:
    """``(site, directory)`` that ``--no-parent`` keeps a crawl from ``url`` in.

    >>> parent_root("https://h/a/b"), parent_root("http://h:8080/a/b/index.html?q")
    (('h', '/a/'), ('h:8080', '/a/b/'))
    """
    site, path = _site_and_path(url)
    return site, path[: path.rfind("/") + 1]


class UrlFilter:
    """The include/exclude patterns and ``--no-parent`` roots of a crawl.
    See the module docstring for the rules."""

    __slots__ = (
        "_cache",
        "_cache_size",
        "_exclude",
        "_include",
        "_roots",
        "accept",
        "exclude",
        "include",
        "no_parent",
        "reject",
        "start_urls",
    )

    def __init__(
        self,
        *,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        no_parent: bool = False,
        start_urls: Iterable[str] = (),
        accept: Iterable[str] = (),
        reject: Iterable[str] = (),
        cache_size: int = 65536,
    ) -> None:
        """Raises ``ConfigError`` (one line) for a pattern that does not compile."""
        self.accept = suffix_list(accept)
        self.reject = suffix_list(reject)
        start_urls = tuple(start_urls)
        #: Their redirects are spared the filters (``FilteredScope.judge_redirect``).
        self.start_urls = frozenset(start_urls)
        self.include = tuple(include)
        self.exclude = tuple(exclude)
        self.no_parent = no_parent
        self._include = _compile("include=", self.include)
        self._exclude = _compile("exclude=", self.exclude)
        self._roots: dict[str, set[str]] | None = None
        # --no-parent's answer per "scheme://site/directory/": a page's links
        # share a few directories (cleared when it grows past cache_size).
        self._cache: dict[str, bool] = {}
        self._cache_size = cache_size
        if no_parent:
            self._roots = {}
            self.add_roots(start_urls)

    def add_roots(self, start_urls: Iterable[str]) -> None:
        """Note more start URLs (``--seeds``) whose directories ``--no-parent``
        allows. Does nothing without ``no_parent``."""
        roots = self._roots
        if roots is None:
            return
        for url in start_urls:
            site, directory = parent_root(url)
            roots.setdefault(site, set()).add(directory)
            self._cache.clear()

    @property
    def active(self) -> bool:
        """Whether any URL can be refused."""
        return bool(self._include or self._exclude or self._roots or self.accept or self.reject)

    def allows(self, url: str) -> bool:
        """Whether the canonical ``url`` passes the filters (rules 1-5)."""
        if self._exclude and any(p.search(url) for p in self._exclude):
            return False
        if self._include and not any(p.search(url) for p in self._include):
            return False
        if (self.accept or self.reject) and not self._file_allowed(url):
            return False
        return self._roots is None or self._below_a_root(url)

    def _file_allowed(self, url: str) -> bool:
        """Rules 4 and 5, which spare directories and HTML file names."""
        name = file_name(url)
        if not name or name.lower().endswith(HTML_SUFFIXES):
            return True
        return file_list_allows(name, self.accept, self.reject)

    def _below_a_root(self, url: str) -> bool:
        query = url.find("?")
        key = url[: url.rfind("/", 0, len(url) if query < 0 else query) + 1]
        answer = self._cache.get(key)
        if answer is None:
            answer = self._below_a_root_uncached(key)
            if len(self._cache) >= self._cache_size:
                self._cache.clear()
            self._cache[key] = answer
        return answer

    def _below_a_root_uncached(self, url: str) -> bool:
        assert self._roots is not None
        site, path = _site_and_path(url)
        directories = self._roots.get(site)
        if directories is None:
            return True  # no start URL on this site: nothing to stay below
        directory = path[: path.rfind("/") + 1]
        # Walk up the URL's own directories (a few: paths are trap-checked),
        # so any number of start URLs costs the same per link.
        while directory:
            if directory in directories:
                return True
            directory = directory[: directory.rfind("/", 0, len(directory) - 1) + 1]
        return False

    def identity(self) -> dict[str, Any] | None:
        """The filters as crawl settings (``--state``/``--redis`` refuse to
        resume with others); None when there are none, as a crawl stored by a
        version without filters says."""
        if not (self.include or self.exclude or self.no_parent or self.accept or self.reject):
            return None
        identity: dict[str, Any] = {
            "include": sorted(set(self.include)),
            "exclude": sorted(set(self.exclude)),
            "no_parent": self.no_parent,
        }
        # Only when given: a crawl stored before they existed still matches.
        if self.accept:
            identity["accept"] = sorted(self.accept)
        if self.reject:
            identity["reject"] = sorted(self.reject)
        return identity

    def __repr__(self) -> str:
        return (
            f"UrlFilter(include={list(self.include)!r}, exclude={list(self.exclude)!r}, "
            f"no_parent={self.no_parent!r}, accept={list(self.accept)!r}, "
            f"reject={list(self.reject)!r})"
        )


class FilteredScope(Scope):
    """A ``Scope`` whose ``allows`` also asks a ``UrlFilter``. Requisites are
    judged by the scope alone (``allows_unfiltered``)."""

    __slots__ = ("url_filter",)

    def __init__(
        self,
        start_urls: Iterable[str],
        allow_domains: Iterable[str] = (),
        *,
        url_filter: UrlFilter,
        cache_size: int = 65536,
        span_hosts: bool = False,
    ) -> None:
        super().__init__(start_urls, allow_domains, cache_size=cache_size, span_hosts=span_hosts)
        self.url_filter = url_filter

    def allows(self, url: str) -> bool:
        return Scope.allows(self, url) and self.url_filter.allows(url)

    def allows_unfiltered(self, url: str) -> bool:
        return Scope.allows(self, url)

    def judge_redirect(self, first: str) -> Callable[[str], bool]:
        if first in self.url_filter.start_urls:  # fetched whatever the filters:
            return self.allows_unfiltered  # so is where it leads
        return self.allows

    def __repr__(self) -> str:
        return f"{Scope.__repr__(self)[:-1]}, url_filter={self.url_filter!r})"
