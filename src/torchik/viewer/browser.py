"""A headless Chromium that opens the viewer's page, so that pictures are taken without a person
(``torchik view --screenshot``, the tests). The system's browser is used (Debian's
``chromium``); nothing is downloaded. WebGL runs in software (SwiftShader)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["find_chromium", "headless_browser", "require_chromium"]

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--no-sandbox",  # as root (CI, containers) Chromium refuses to start with its sandbox
    "--use-angle=swiftshader",  # WebGL without a GPU
    "--enable-unsafe-swiftshader",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--no-proxy-server",  # the page is on 127.0.0.1
    "--remote-debugging-port=0",  # keeps a headless browser open until it is ended
)


def find_chromium() -> str | None:
    """The path of a Chromium (``$TORCHIK_CHROMIUM`` first), or ``None``.

    Example:
        >>> find_chromium() is None or os.path.isfile(find_chromium())
        True
    """
    named = os.environ.get("TORCHIK_CHROMIUM")
    found = [shutil.which(name) for name in ((named,) if named else NAMES)]
    return next((path for path in found if path), None)


def require_chromium() -> str:
    """:func:`find_chromium`'s path, checked before any work (a viewer takes seconds to start).

    Raises:
        RuntimeError: no Chromium is installed (one line: how to install it).
    """
    binary = find_chromium()
    if binary is None:
        raise RuntimeError(
            "no Chromium found for a headless screenshot: install it (Debian: apt-get install "
            "chromium) or set TORCHIK_CHROMIUM to its path"
        )
    return binary


@contextlib.contextmanager
def headless_browser(
    viewer: Any, width: int = 960, height: int = 720, timeout: float = 45.0
) -> Iterator[Any]:
    """Open ``viewer.url`` in a headless Chromium and wait until the page is connected.

    Args:
        viewer: a :class:`~torchik.viewer.Viewer`.
        width, height: the browser window (pictures can be at most this size).
        timeout: seconds to wait for the page to connect.

    Yields:
        The viewer's ``viser`` client handle of that page.

    Raises:
        RuntimeError: no Chromium is installed, or the page did not connect in time.
    """
    binary = require_chromium()
    before = set(viewer.server.get_clients())
    # Chromium's helper processes can still write to the profile while it is removed: a
    # leftover file there must not fail the screenshot (it failed CI once)
    with tempfile.TemporaryDirectory(
        prefix="torchik-chromium-", ignore_cleanup_errors=True
    ) as profile:
        args = [binary, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"]
        process = subprocess.Popen(
            [*args, viewer.url],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            yield _wait_for_client(viewer, before, process, timeout)
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_for_client(viewer: Any, before: set, process: subprocess.Popen, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        new = {k: c for k, c in viewer.server.get_clients().items() if k not in before}
        if new:
            return next(iter(new.values()))
        if process.poll() is not None:
            raise RuntimeError(f"Chromium exited with status {process.returncode}")
        time.sleep(0.1)
    raise RuntimeError(f"the headless browser did not open {viewer.url} within {timeout:.0f} s")
