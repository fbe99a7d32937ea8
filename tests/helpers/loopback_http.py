"""A loopback HTTP server for download tests: the shared data folder served as the datasets' upstream."""

from __future__ import annotations

import threading
import urllib.parse
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer


class QuietLog:
    """A request handler mixin that logs nothing."""

    def log_message(self, *args):  # keep pytest output clean
        pass


class FileHandler(QuietLog, SimpleHTTPRequestHandler):
    """Serves the files under its `directory` (functools.partial(FileHandler, directory=...))."""


def serve_in_thread(handler):
    """An HTTP server on a free loopback port, serving from a daemon thread: (server, thread)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread


def loopback_entry(entry: dict, base_url: str) -> dict:
    """The dataset's entry with upstream paths mapped onto the shared/data layout (URL-quoted)."""
    files = {
        name: {"upstream": urllib.parse.quote(name), "sha256": spec["sha256"]} for name, spec in entry["files"].items()
    }
    return {**entry, "base_url": base_url, "files": files}
