"""Webhook signing and posting: the one module that talks HTTP to a deployment's webhook receivers
(docs/monitoring.md, "Webhooks"). No models: monitoring.services.webhooks keeps the log.

A delivery is signed as GitHub and Stripe sign theirs: ``X-Portal-Signature: t=<unix seconds>,
v1=<hex HMAC-SHA256 of "<t>.<body>" under the endpoint's secret>``. The timestamp is signed with the
body, so a receiver that rejects old timestamps cannot be replayed a captured delivery later.
"""

from __future__ import annotations

import hashlib
import hmac
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Final

SIGNATURE_HEADER: Final = "X-Portal-Signature"
EVENT_HEADER: Final = "X-Portal-Event"
DELIVERY_HEADER: Final = "X-Portal-Delivery"
# How old a signed timestamp a receiver should accept (the docs' receiver; verify's default).
TOLERANCE_SECONDS: Final = 300
# How much of a receiver's answer is kept in the delivery log.
RESPONSE_HEAD_BYTES: Final = 1024


def signature(*, secret: str, body: bytes, timestamp: int) -> str:
    """The hex HMAC-SHA256 of ``"<timestamp>.<body>"`` under ``secret``."""
    message = str(int(timestamp)).encode() + b"." + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_header(*, secret: str, body: bytes, timestamp: int | None = None) -> str:
    t = int(time.time()) if timestamp is None else int(timestamp)
    return f"t={t},v1={signature(secret=secret, body=body, timestamp=t)}"


def signature_verify(
    *, secret: str, body: bytes, header: str, now: float | None = None, tolerance: int = TOLERANCE_SECONDS
) -> bool:
    """What a receiver does (docs/monitoring.md shows the same in a few lines): the header parses, its
    timestamp is within ``tolerance`` seconds of ``now``, and one of its ``v1`` signatures matches
    (compared in constant time)."""
    timestamp: int | None = None
    candidates: list[str] = []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t" and value.isdigit():
            timestamp = int(value)
        elif key == "v1":
            candidates.append(value)
    if timestamp is None or not candidates:
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        return False
    expected = signature(secret=secret, body=body, timestamp=timestamp)
    return any(hmac.compare_digest(expected, candidate) for candidate in candidates)


@dataclass(frozen=True)
class Answer:
    """A receiver's answer: its HTTP status and the first bytes of its body, as text (untrusted)."""

    status: int
    body_head: str


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    # A 3xx is the receiver's answer, logged as it is: following it would post the signed body to a URL
    # nobody registered.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER: Final = urllib.request.build_opener(_NoRedirects())


def post(*, url: str, body: bytes, headers: dict[str, str], timeout: float) -> Answer:
    """POST ``body`` to ``url`` once, no redirects followed, within ``timeout`` seconds per socket
    operation. Any HTTP status is an Answer; no answer at all (refused, timed out, TLS) raises OSError."""
    if not url.lower().startswith(("https://", "http://")):
        raise ValueError(f"a webhook URL is http(s), not {url[:20]!r}")
    # The scheme is checked just above (and when the endpoint was registered): never file: or ftp:.
    request = urllib.request.Request(  # noqa: S310
        url, data=body, method="POST", headers={"Content-Type": "application/json", **headers}
    )
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            return Answer(status=response.status, body_head=_head(response.read(RESPONSE_HEAD_BYTES)))
    except urllib.error.HTTPError as error:  # 3xx (not followed), 4xx, 5xx: an answer
        with error:
            return Answer(status=error.code, body_head=_head(error.read(RESPONSE_HEAD_BYTES)))


def _head(data: bytes) -> str:
    return data.decode("utf-8", errors="replace").replace("\x00", "\ufffd")
