"""Fallback static server for the benchmark when nginx is not installed.

``http.server`` with a thread per connection, HTTP/1.1 keep-alive, no per-request log,
bound to 127.0.0.1 only. Much slower per request than nginx: see servers.py.

Usage: python pyserver.py SITE_DIR --port PORT
"""

from __future__ import annotations

import argparse
import functools
import sys
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class QuietHandler(SimpleHTTPRequestHandler):
    """Static files over HTTP/1.1 (keep-alive: every answer has a Content-Length)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="benchmark fallback static server")
    parser.add_argument("directory")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    handler = functools.partial(QuietHandler, directory=args.directory)
    with Server(("127.0.0.1", args.port), handler) as server:
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
