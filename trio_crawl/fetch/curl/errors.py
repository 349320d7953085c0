"""The curl fetcher's classifier: libcurl error codes to ``FetchError`` kinds.

libcurl reports a failed transfer as a code and a message, not as an
exception. The fetcher wraps them in ``CurlError`` and raises it inside
``errors.translated_errors``, the path every fetcher's failures take;
``error_kind`` is the classifier it passes there. A ``CurlError`` keeps
libcurl's wording: ``curl error 18: transfer closed with ... remaining``.

Codes and their kinds::

    E_OPERATION_TIMEDOUT                                       -> timeout
    E_COULDNT_CONNECT, E_COULDNT_RESOLVE_HOST/PROXY,
        E_UNSUPPORTED_PROTOCOL before the request was sent
        (ftp://, file://: never fetched), E_URL_MALFORMAT      -> connect
    E_SSL_CONNECT_ERROR (handshake), E_PEER_FAILED_VERIFICATION
        (untrusted, expired, wrong host name), E_SSL_CACERT_BADFILE,
        E_SSL_CERTPROBLEM, E_SSL_CIPHER, E_SSL_ISSUER_ERROR,
        E_SSL_INVALIDCERTSTATUS, E_SSL_PINNEDPUBKEYNOTMATCH      -> tls
    E_RECV_ERROR, E_SEND_ERROR, E_GOT_NOTHING                  -> reset
    E_RECV_ERROR about chunks, E_PARTIAL_FILE, weird server
        reply (bad head), HTTP/2 and HTTP/3 errors,
        E_UNSUPPORTED_PROTOCOL after the request was sent (an
        HTTP/0.9 answer, a garbage status line)                -> protocol
    E_BAD_CONTENT_ENCODING, zlib.error, brotli.error (the
        collector decodes bodies itself)                       -> decode
    E_FILESIZE_EXCEEDED                                        -> too_large
    any other code                                             -> protocol
"""

from __future__ import annotations

import pycurl

from ..decode import is_decode_error
from ..errors import ReportedError

__all__ = ["CurlError", "curl_kind", "error_kind"]

_E_WEIRD_SERVER_REPLY: int = pycurl.E_FTP_WEIRD_SERVER_REPLY  # 8, renamed in libcurl 7.51
_E_HTTP2_STREAM = 92  # libcurl >= 7.49; pycurl 7.49 exports no name for it
_E_HTTP3 = 95

_KIND_BY_CODE: dict[int, str] = {
    pycurl.E_OPERATION_TIMEDOUT: "timeout",
    pycurl.E_COULDNT_CONNECT: "connect",
    pycurl.E_COULDNT_RESOLVE_HOST: "connect",
    pycurl.E_COULDNT_RESOLVE_PROXY: "connect",
    pycurl.E_UNSUPPORTED_PROTOCOL: "connect",  # e.g. ftp:// or file://: never fetched
    pycurl.E_URL_MALFORMAT: "connect",
    pycurl.E_SSL_CONNECT_ERROR: "tls",
    pycurl.E_PEER_FAILED_VERIFICATION: "tls",
    pycurl.E_SSL_CACERT_BADFILE: "tls",
    pycurl.E_SSL_CERTPROBLEM: "tls",
    pycurl.E_SSL_CIPHER: "tls",
    pycurl.E_SSL_ISSUER_ERROR: "tls",
    pycurl.E_SSL_INVALIDCERTSTATUS: "tls",
    pycurl.E_SSL_PINNEDPUBKEYNOTMATCH: "tls",
    pycurl.E_RECV_ERROR: "reset",
    pycurl.E_SEND_ERROR: "reset",
    pycurl.E_GOT_NOTHING: "reset",
    pycurl.E_PARTIAL_FILE: "protocol",
    _E_WEIRD_SERVER_REPLY: "protocol",
    pycurl.E_HTTP2: "protocol",
    _E_HTTP2_STREAM: "protocol",
    _E_HTTP3: "protocol",
    pycurl.E_BAD_CONTENT_ENCODING: "decode",
    pycurl.E_FILESIZE_EXCEEDED: "too_large",
}


class CurlError(ReportedError):
    """A transfer libcurl ended with error ``code`` (a ``pycurl.E_*`` number);
    ``sent``: whether the request had been sent (the server was reached)."""

    def __init__(self, code: int, message: str, *, sent: bool = False) -> None:
        super().__init__(f"curl error {code}: {message}")
        self.code = code
        self.message = message
        self.sent = sent


def curl_kind(code: int, message: str, sent: bool = False) -> str:
    """The ``FetchError`` kind for curl error ``code``.

    libcurl reports malformed chunked encoding as a receive error; the message
    tells it apart from a reset connection. It reports an answer in no HTTP
    version it accepts (HTTP/0.9, ``HTTP/1.1 abc``) with the code of a URL
    scheme it does not speak: once the request was ``sent``, that is the
    server's ``protocol``, not a failure to connect. Codes we do not know are
    a server or network failure we cannot classify better: ``protocol``.
    """
    kind = _KIND_BY_CODE.get(code, "protocol")
    if kind == "reset" and "chunk" in message.lower():
        return "protocol"
    if code == pycurl.E_UNSUPPORTED_PROTOCOL and sent:
        return "protocol"
    return kind


def error_kind(exc: BaseException) -> str | None:
    """The kind of a ``CurlError`` or of a body decoder's error; ``None`` for
    anything else (a bug)."""
    if isinstance(exc, CurlError):
        return curl_kind(exc.code, exc.message, exc.sent)
    if is_decode_error(exc):
        return "decode"
    return None
