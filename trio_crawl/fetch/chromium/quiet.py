"""Settling early: a page with nothing left to do is read at once.

A page counts as settled ``QUIET`` seconds after its load event and its last
request (``life``), so that a timer it sets for less than that is waited
for. Most pages set none: waiting out the fixed period costs them half a
second each for nothing. So each document gets a small watcher before its
own scripts run (``WATCH``, ``Page.addScriptToEvaluateOnNewDocument``),
which counts what may still change the page: timers of ``QUIET`` seconds
or less not yet fired (``setTimeout``; a short ``setInterval`` until it is
cleared), animation frames asked for and not yet run, and when the DOM last
changed (a ``MutationObserver``). The tab asks it (``PROBE``) once the
network is idle, and the page is settled at once if it is ``still``.

Rules:

1. Still: no request in flight, the last one over ``STILL`` seconds ago, no
   short timer or animation frame pending, and no DOM change for ``STILL``
   seconds. A page that keeps a short interval or an animation loop going
   is never still: it gets the fixed ``QUIET`` period, as before.
2. A timer with a string body (``setTimeout("code", 10)``) or a long
   delay is not counted (a long one is not waited for anyway); a string one
   is rare, and falls back to the DOM's stillness.
3. The watcher changes nothing a page sees but the identity of the wrapped
   functions; it lives in the page's own world (a timer set there is what
   it must see). A page that replaced the functions itself is not watched
   (no probe answer): it gets the fixed period.

Pure: the source text and the decision, no trio, no browser.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PROBE", "STILL", "WATCH", "is_still"]

#: Seconds of no network event and no DOM change that make a page still.
STILL = 0.1

#: Installed on every new document of a tab, before the page's scripts.
WATCH = r"""
(() => {
  const key = Symbol.for('trio-crawl.quiet');
  if (globalThis[key]) return;
  const SHORT = 500;
  const pending = new Set();
  const ids = new Map();
  let changed = performance.now();
  const wrap = (set, clear, isShort) => [
    function (fn, delay, ...rest) {
      if (typeof fn !== 'function' || !isShort(delay)) return set.call(this, fn, delay, ...rest);
      const token = {};
      pending.add(token);
      const once = set === setTimeout;
      const id = set.call(this, function (...args) {
        if (once) { pending.delete(token); ids.delete(id); }
        return fn.apply(this, args);
      }, delay, ...rest);
      ids.set(id, token);
      return id;
    },
    function (id) { const t = ids.get(id); if (t) { pending.delete(t); ids.delete(id); }
                    return clear.call(this, id); },
  ];
  const short = (delay) => !(Number(delay) > SHORT);
  [globalThis.setTimeout, globalThis.clearTimeout] = wrap(setTimeout, clearTimeout, short);
  [globalThis.setInterval, globalThis.clearInterval] = wrap(setInterval, clearInterval, short);
  const frames = new Map();
  const raf = requestAnimationFrame, caf = cancelAnimationFrame;
  globalThis.requestAnimationFrame = function (fn) {
    const token = {};
    pending.add(token);
    const id = raf.call(this, (t) => { pending.delete(token); frames.delete(id); return fn(t); });
    frames.set(id, token);
    return id;
  };
  globalThis.cancelAnimationFrame = function (id) {
    const t = frames.get(id); if (t) { pending.delete(t); frames.delete(id); }
    return caf.call(this, id);
  };
  new MutationObserver(() => { changed = performance.now(); }).observe(document, {
    subtree: true, childList: true, attributes: true, characterData: true });
  Object.defineProperty(globalThis, key, {
    value: () => ({pending: pending.size, still: (performance.now() - changed) / 1000}),
  });
})()
"""

#: What the watcher says now: ``{pending, still}`` (None: no watcher).
PROBE = "globalThis[Symbol.for('trio-crawl.quiet')]?.()"


def is_still(answer: Any) -> bool:
    """Whether the watcher's ``answer`` to ``PROBE`` says nothing is left
    to do (rule 1; the caller checks the network)."""
    if not isinstance(answer, dict):
        return False
    pending, still = answer.get("pending"), answer.get("still")
    if not isinstance(pending, int) or not isinstance(still, int | float):
        return False
    return pending == 0 and still >= STILL
