"""``--handler MODULE:FUNCTION``: importing the user's handler, and
watching it under ``--fail-fast`` so that the command line can tell a
handler's error (exit 1) from a bug of ours (exit 70)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import inspect
import os
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Iterable
from typing import Any, cast

from ..core.scrape import Handler, Page, Request, is_async_handler
from .common import UsageError

__all__ = ["LOADED_HANDLERS", "HandlerWatch", "load_handler"]


#: Handler modules this run imported (``load_handler``): user code, whose
#: files may be left for Python's teardown to flush, so the command then
#: ends with the ordinary exit (``trio_crawl.__main__.may_exit_now``).
LOADED_HANDLERS: list[str] = []


def load_handler(spec: str) -> Handler:
    """Import ``module:function`` (the current directory is importable)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise UsageError(f"--handler must look like module:function (got {spec!r})")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    LOADED_HANDLERS.append(module_name)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"cannot import handler module {module_name!r}: {exc}") from None
    except Exception as exc:  # the user's module raised while it was imported
        raise UsageError(
            f"--handler {spec}: importing {module_name!r} raised "
            f"{type(exc).__name__}: {exc}".rstrip(": ")
        ) from None
    handler = getattr(module, attr, None)
    if not callable(handler):
        raise UsageError(f"{module_name!r} has no callable {attr!r}")
    if not is_async_handler(handler):  # it would fail every page, one record at a time
        raise UsageError(
            f"--handler {spec}: {attr} is not an async function (async def, yielding or "
            "returning items and Requests)"
        )
    return cast(Handler, handler)


class HandlerWatch:
    """Under ``--fail-fast``, wraps the handlers (and those their Requests
    name) to remember the exception a handler raised and its page's URL: the
    CLI then tells a handler's error (exit 1) from a bug of ours (exit 70).
    The exception itself goes on unchanged."""

    def __init__(self) -> None:
        self.failure: tuple[str, BaseException] | None = None
        self._wrapped: dict[Handler, Handler] = {}

    def message(self, exc: BaseException) -> str | None:
        """``handler error at URL: Type: message`` if ``exc`` is the handler's."""
        if self.failure is None or self.failure[1] is not exc:
            return None
        return f"handler error at {self.failure[0]}: {type(exc).__name__}: {exc}"

    def wrap(self, handler: Handler) -> Handler:
        known = self._wrapped.get(handler)
        if known is not None:
            return known

        def watched(page: Page, /) -> AsyncIterator[object] | Awaitable[Iterable[object] | None]:
            try:
                produced = handler(page)
            except Exception as exc:
                self._note(page.url, exc)
                raise
            if inspect.isasyncgen(produced):
                return self._generator(produced, page.url)
            return self._awaitable(cast(Awaitable[Iterable[object] | None], produced), page.url)

        # It is what it wraps: is_async_handler (the config's check) looks through it.
        functools.update_wrapper(watched, handler)
        self._wrapped[handler] = self._wrapped[watched] = watched
        return watched

    def _note(self, url: str, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = (url, exc)

    def _output(self, output: object) -> object:
        if isinstance(output, Request) and output.handler is not None:
            return dataclasses.replace(output, handler=self.wrap(output.handler))
        return output

    async def _generator(
        self, produced: AsyncGenerator[object, Any], url: str
    ) -> AsyncIterator[object]:
        async with contextlib.aclosing(produced):
            try:
                async for output in produced:
                    yield self._output(output)
            except Exception as exc:
                self._note(url, exc)
                raise

    async def _awaitable(
        self, produced: Awaitable[Iterable[object] | None], url: str
    ) -> Iterable[object] | None:
        try:
            outputs = await produced
            return None if outputs is None else [self._output(o) for o in outputs]
        except Exception as exc:
            self._note(url, exc)
            raise
