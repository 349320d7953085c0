"""Which CAs https peers are verified against, and what a TLS failure is.

Rules, the same for every fetcher:

1. ``FetchConfig.ca_bundle`` (``--ca-bundle``), when given, is the only
   trust store: a PEM file, or an OpenSSL hashed directory. It replaces the
   system's CAs rather than adding to them, as ``SSL_CERT_FILE`` does for
   Python and ``CURLOPT_CAINFO`` for libcurl. A path that does not exist is
   an error when the fetcher is opened, not a ``tls`` record per page.
2. Without it, the standard environment variables are honoured, first hit
   wins: ``SSL_CERT_FILE``, then (libcurl only) ``CURL_CA_BUNDLE``, then
   ``SSL_CERT_DIR``. A variable naming a missing path is ignored.
3. Without either, each library's default stands. httpx2 (through httpcore2)
   loads OpenSSL's compiled-in default file and directory on Linux
   (``ssl.get_default_verify_paths()``; truststore only on Windows and
   macOS; certifi is not used). asks uses Python's
   ``ssl.create_default_context()``, the same paths. pycurl's wheels carry
   their own libcurl, built with another distribution's bundle path, so the
   curl fetcher points it at the file Python's ``ssl`` uses, or a usual
   system path (``curl.handle.find_ca_bundle``).
4. A handshake that fails (certificate not trusted or expired, wrong host
   name, no common protocol or cipher) is ``FetchError("tls")``: asking
   again gets the same answer, so it is not retried. Each fetcher's
   classifier decides it from its library's failure; ``is_tls_failure``
   finds an ``ssl.SSLError`` behind a library's connect error.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping

__all__ = ["ca_locations", "is_tls_failure", "ssl_context"]


def ca_locations(
    ca_bundle: str | None, environ: Mapping[str, str], *, curl: bool = False
) -> tuple[str | None, str | None]:
    """``(cafile, capath)`` to verify peers with (rules 1 and 2);
    ``(None, None)``: the library's default (rule 3). Raises
    ``FileNotFoundError`` for a ``ca_bundle`` that does not exist."""
    if ca_bundle is not None:
        if os.path.isdir(ca_bundle):
            return None, ca_bundle
        if not os.path.isfile(ca_bundle):
            raise FileNotFoundError(f"CA bundle not found: {ca_bundle}")
        return ca_bundle, None
    for name in ("SSL_CERT_FILE", "CURL_CA_BUNDLE") if curl else ("SSL_CERT_FILE",):
        path = environ.get(name)
        if path and os.path.isfile(path):
            return path, None
    directory = environ.get("SSL_CERT_DIR")
    if directory and os.path.isdir(directory):
        return None, directory
    return None, None


def ssl_context(ca_bundle: str | None, environ: Mapping[str, str]) -> ssl.SSLContext | None:
    """A verifying client context for Python TLS stacks (httpx, asks) that
    trusts what ``ca_locations`` says; ``None`` to keep the library's default."""
    cafile, capath = ca_locations(ca_bundle, environ)
    if cafile is None and capath is None:
        return None
    return ssl.create_default_context(cafile=cafile, capath=capath)


def is_tls_failure(exc: BaseException) -> bool:
    """Whether an ``ssl.SSLError`` (other than the peer closing the TLS
    stream) is ``exc`` or behind it, along ``__cause__``/``__context__``."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ssl.SSLError) and not isinstance(
            current, ssl.SSLEOFError | ssl.SSLZeroReturnError
        ):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
