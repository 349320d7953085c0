"""The browser process: found, started with a fresh profile, ended with us.

Rules:

1. The executable was chosen by ``core.browser.find_browser`` (checked when
   the crawl opens its fetcher: ``engine/resources.py``); a browser that
   cannot be started is a ``ConfigError``.
2. Chromium runs headless with ``--remote-debugging-pipe`` (fd 3: our
   commands, fd 4: its answers; no TCP port), in a new temporary
   ``--user-data-dir`` removed afterwards, which is also its ``HOME`` and
   XDG directories, with no extensions, sync, background networking or
   first-run state: nothing of the user's is read or written. Nothing a
   crawl never uses is kept or started ahead (the back-forward cache, a
   spare renderer, the omnibox popup's renderer): memory goes to the tabs.
3. It ends with us. The pipe closing ends it: when our process dies, even by
   SIGKILL, the kernel closes our ends and Chromium exits on its own. On a
   normal exit we ask it to close (``Browser.close``), close the pipe, wait
   a bounded time, then kill its process group. A profile left behind by a
   killed crawler is removed by the next browser started on the machine
   (``remove_orphan_profiles``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass

import trio

from ...errors import ConfigError
from .cdp import CdpConnection, open_cdp

__all__ = ["Browser", "browser_command", "open_browser"]

#: Temporary profiles are named this, the crawler's process id and a random part.
PROFILE_PREFIX = "trio-crawl-chromium-"
#: How long a closing browser gets to exit before it is killed.
EXIT_GRACE = 5.0


def browser_command(
    executable: str, profile: str, user_agent: str, proxy_flags: Sequence[str] = ()
) -> list[str]:
    """Chromium's argument list: headless, the pipe, a fresh profile, the
    crawl's User-Agent and proxy (``proxy.browser_proxy``), and the
    background features that would talk to the network switched off."""
    return [
        executable,
        f"--user-agent={user_agent}",
        *proxy_flags,
        "--headless",
        "--remote-debugging-pipe",
        f"--user-data-dir={profile}",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-component-extensions-with-background-pages",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-default-apps",
        "--disable-sync",
        "--disable-domain-reliability",
        "--disable-client-side-phishing-detection",
        "--disable-breakpad",
        "--disable-crash-reporter",
        "--metrics-recording-only",
        "--no-pings",
        "--mute-audio",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        # Every tab renders a page the crawl waits for, visible or not: no
        # tab's timers may be slowed as a background tab's are (a page's
        # setTimeout would fire after it was read; issue #36 item 9).
        "--disable-background-timer-throttling",
        "--disable-renderer-backgrounding",
        "--disable-backgrounding-occluded-windows",
        # Memory (issue #34 item 5): a crawl never goes back, so no tab
        # keeps the pages it left alive for a back button (below too); no
        # renderer is started ahead for a navigation that may never come,
        # and no window preloads the omnibox popup's WebUI renderer.
        "--disable-back-forward-cache",
        "--disable-features=Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,"
        "AutofillServerCommunication,InterestFeedContentSuggestions,PrivacySandboxSettings4,"
        "OptimizationGuideModelDownloading,OptimizationGuideOnDeviceModel,"
        "OptimizationHintsFetching,OptimizationTargetPrediction,"
        "HttpsUpgrades,HttpsFirstBalancedModeAutoEnable,"  # http is fetched as http
        "IntensiveWakeUpThrottling,"
        "BackForwardCache,SpareRendererForSitePerProcess,"
        "WebUIOmniboxPopup,WebUIOmniboxFullPopup,WebUIOmniboxAimPopup,AimEnabled,"
        "PreloadTopChromeWebUI",
        "--password-store=basic",
        "--use-mock-keychain",
        *(["--no-sandbox"] if os.geteuid() == 0 else []),  # root cannot use the sandbox
        "about:blank",
    ]


@dataclass(slots=True)
class Browser:
    """A running browser: its process and the protocol connection to it."""

    process: trio.Process
    cdp: CdpConnection
    profile: str


def _high_fd(fd: int) -> int:
    """``fd`` moved to a number above 10, so putting the pipe on fds 3 and 4
    in the child cannot overwrite the other end."""
    import fcntl

    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


def browser_environment(environ: Mapping[str, str], profile: str) -> dict[str, str]:
    """The browser's environment: ours, with its home and XDG directories
    inside the temporary profile, so that nothing (crash reports, the NSS
    certificate database, caches) is read from or written to the user's."""
    return {
        **environ,
        "HOME": profile,
        "XDG_CONFIG_HOME": os.path.join(profile, "config"),
        "XDG_CACHE_HOME": os.path.join(profile, "cache"),
        "XDG_DATA_HOME": os.path.join(profile, "data"),
    }


def remove_orphan_profiles(directory: str, alive: Callable[[int], bool] | None = None) -> None:
    """Remove the profiles that crawlers killed before they could (SIGKILL):
    their name carries the crawler's process id, and that process is gone."""
    alive = alive or _alive
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        owner = name.removeprefix(PROFILE_PREFIX).partition("-")[0]
        if name.startswith(PROFILE_PREFIX) and owner.isdigit() and not alive(int(owner)):
            shutil.rmtree(os.path.join(directory, name), ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@asynccontextmanager
async def open_browser(
    executable: str, user_agent: str, proxy_flags: Sequence[str] = ()
) -> AsyncIterator[Browser]:
    """Start the browser; close and reap it, and remove its profile, on exit
    (also when cancelled)."""
    remove_orphan_profiles(tempfile.gettempdir())
    profile = tempfile.mkdtemp(prefix=f"{PROFILE_PREFIX}{os.getpid()}-")
    to_browser_r, to_browser_w = (_high_fd(fd) for fd in os.pipe())
    from_browser_r, from_browser_w = (_high_fd(fd) for fd in os.pipe())

    def child_fds() -> None:  # runs in the child between fork and exec
        os.dup2(to_browser_r, 3)
        os.dup2(from_browser_w, 4)
        os.setpgid(0, 0)  # Ctrl-C goes to us; we end the browser ourselves

    try:
        process = await trio.lowlevel.open_process(
            browser_command(executable, profile, user_agent, proxy_flags),
            env=browser_environment(os.environ, profile),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=False,  # our fds are close-on-exec; 3 and 4 are not
            preexec_fn=child_fds,
        )
    except OSError as exc:
        for fd in (to_browser_r, to_browser_w, from_browser_r, from_browser_w):
            os.close(fd)
        shutil.rmtree(profile, ignore_errors=True)
        raise ConfigError(
            f"cannot start the browser {executable}: {exc.strerror or exc}"
        ) from None
    os.close(to_browser_r)
    os.close(from_browser_w)
    send = trio.lowlevel.FdStream(to_browser_w)
    receive = trio.lowlevel.FdStream(from_browser_r)
    try:
        async with open_cdp(send, receive) as cdp:
            try:
                yield Browser(process, cdp, profile)
            finally:
                with trio.move_on_after(1, shield=True):
                    with suppress(Exception):
                        await cdp.send("Browser.close")
    finally:
        with trio.CancelScope(shield=True):
            await _end(process, send, receive)
            shutil.rmtree(profile, ignore_errors=True)


async def _end(
    process: trio.Process, send: trio.lowlevel.FdStream, receive: trio.lowlevel.FdStream
) -> None:
    """Close the pipe (Chromium exits when it reads its end), wait a bounded
    time, then kill the browser's process group."""
    await send.aclose()
    with trio.move_on_after(EXIT_GRACE):
        await process.wait()
    if process.returncode is None:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
    else:  # helpers (zygote, renderers) follow the browser; make sure
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    await receive.aclose()
