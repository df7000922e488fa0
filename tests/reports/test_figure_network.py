"""The Chromium that draws the reports' figures fetches nothing from a network.

A figure is drawn from what users wrote (names, configs); were a URL to reach it as markup or an
image, the worker's browser would fetch it from inside the portal's network (blind SSRF). The
figures escape every name (tests/figures/test_hostile_text.py); here the exporter itself is handed
a figure that asks for URLs (a layout image, CSS ``url()`` in a styled span, a link) on a server
this test runs, and the server must see no request, cold export and warm.
"""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import plotly.graph_objects as go
import pytest

from auditportal.reports import figures
from tests.browser.conftest import NO_CHROMIUM, chromium_path, require_system_tool
from tests.loopback import LoopbackServer

pytestmark = pytest.mark.slow

# A 1x1 transparent PNG: what the server would answer, so that a fetch succeeds and is seen.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


class Listener:
    def __init__(self) -> None:
        self.requests: list[str] = []
        requests = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                requests.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Access-Control-Allow-Origin", "*")
                self.send_header("Content-Length", str(len(PNG)))
                self.end_headers()
                self.wfile.write(PNG)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.loopback = LoopbackServer(Handler)
        self.url = self.loopback.base_url

    def __enter__(self) -> Listener:
        self.loopback.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.loopback.stop()


@pytest.fixture
def listener() -> Iterator[Listener]:
    if chromium_path() is None:
        require_system_tool(NO_CHROMIUM)
    with Listener() as running:
        yield running
    figures.stop_warm_export()


def _asking(url: str) -> go.Figure:
    """A figure whose drawing would fetch ``url``: markup the figure builders never let through, put
    here by hand (what an escaping bug would let through)."""
    figure = go.Figure(go.Bar(x=["a", "b"], y=[1, 2]))
    figure.update_layout(
        title_text=f'<span style="background:url({url}/css-title)">title</span> <a href="{url}/link">link</a>',
        xaxis_title=f'<span style="background-image:url({url}/css-axis)">axis</span>',
        images=[{"source": f"{url}/layout-image.png", "xref": "paper", "yref": "paper", "x": 0, "y": 1,
                 "sizex": 0.2, "sizey": 0.2}],
    )  # fmt: skip
    return figure


def test_the_cold_export_fetches_nothing(listener: Listener) -> None:
    svg = figures.figure_svg(_asking(listener.url))
    assert svg.startswith("<svg")
    assert listener.requests == []


def test_the_warm_export_fetches_nothing(listener: Listener) -> None:
    figures.start_warm_export()
    svg = figures.figure_svg(_asking(listener.url))
    assert svg.startswith("<svg")
    assert listener.requests == []


def test_the_listener_would_see_a_browser_that_fetches(listener: Listener) -> None:
    """The listener is not deaf: Chromium with kaleido's own options fetches the layout image."""
    import kaleido

    spec = _asking(listener.url).to_dict()
    kaleido.calc_fig_sync(spec, opts={"format": "svg", "width": 400, "height": 300}, kopts={"mathjax": False})
    assert "/layout-image.png" in listener.requests
