"""A real HTTP server on 127.0.0.1 (a free port), served from a thread while its ``with`` block runs:
what a test's receiver (a webhook's endpoint, a page a figure must never fetch) listens on."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoopbackServer:
    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        # serve_forever checks for shutdown() every poll_interval (0.5 s by default): stop would wait that long.
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
