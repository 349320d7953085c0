"""A Request's payload (its handler, meta, headers, priority) as it crosses
processes: JSON in Redis, the handler by its importable name
(``module:qualname``), so any worker can call it."""

from __future__ import annotations

import importlib
import json
from typing import Any

from ...core.scrape import Request
from ...errors import RedisFrontierError


def handler_name(handler: object) -> str:
    module = getattr(handler, "__module__", None)
    qualname = getattr(handler, "__qualname__", "")
    if not module or "<" in qualname:
        raise RedisFrontierError(
            f"handler {handler!r} cannot cross processes: use a module-level function"
        )
    return f"{module}:{qualname}"


def _import_handler(name: str) -> Any:
    module_name, _, qualname = name.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


def encode_payload(payload: object) -> str:
    """A Request as JSON (its handler by importable name); '' for none."""
    if not isinstance(payload, Request):
        return ""
    try:
        return json.dumps(
            {
                "handler": None if payload.handler is None else handler_name(payload.handler),
                "meta": dict(payload.meta),
                "headers": None if payload.headers is None else dict(payload.headers),
                "priority": payload.priority,
            },
            separators=(",", ":"),
        )
    except TypeError as exc:
        raise RedisFrontierError(f"a Request's meta must be JSON for --redis: {exc}") from None


def decode_payload(url: str, text: str) -> Request | None:
    if not text:
        return None
    data = json.loads(text)
    handler = None if data["handler"] is None else _import_handler(data["handler"])
    return Request(
        url,
        handler=handler,
        meta=data["meta"],
        headers=data["headers"],
        priority=data["priority"],
    )
