"""Every link the portal renders leads somewhere (issue 27: /datasets/ answered 404 on a link the app
itself asked for). As each kind of user, the crawler starts at the home page, follows the navigation
and then the links of the pages it reached (two clicks deep), and the URLs pages fetch for their
figures and live updates (``data-*-url``): none may answer 404, 403 or a server error, directly or at
the end of its redirects."""

from __future__ import annotations

import re
from collections import deque
from html import unescape
from urllib.parse import urldefrag, urlsplit

import pytest
from django.test import Client

from auditportal.accounts.models import Role, User
from tests.api.conftest import Portal, module_portal
from tests.factories import make_user

__all__ = ["module_portal"]

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

_LINK = re.compile(r'<a\b[^>]*\bhref="(?P<url>[^"]+)"', re.IGNORECASE)
_FETCHED = re.compile(r'\bdata-[a-z-]*url="(?P<url>[^"]+)"', re.IGNORECASE)
_NAV = re.compile(r"<nav\b[^>]*>(?P<nav>.*?)</nav>", re.S)
DEPTH = 2  # the navigation's pages, then the pages they link to
MAX_PAGES = 120  # per user: enough for every kind of page the portal has
# Not pages of the portal's own: the admin site (its own links, its own tests), the static files
# (WhiteNoise, before the URLconf) and downloads a page offers (files, not links to follow further).
SKIPPED = ("/admin/", "/static/")


@pytest.fixture
def portal(module_portal: Portal, db: None) -> Portal:
    return module_portal


def _links(body: str) -> list[str]:
    found = [match["url"] for match in _LINK.finditer(body)] + [match["url"] for match in _FETCHED.finditer(body)]
    internal = []
    for raw in found:
        url = urldefrag(unescape(raw)).url
        parts = urlsplit(url)
        if parts.scheme or parts.netloc or not url.startswith("/") or url.startswith(SKIPPED):
            continue  # elsewhere (the API docs' outside links), or not the portal's pages
        internal.append(url)
    return internal


def _crawl(client: Client) -> tuple[list[str], dict[str, str]]:
    """(the pages visited, what went wrong where: URL -> the answer and the page that linked it)."""
    home = client.get("/")
    assert home.status_code == 200
    nav = _NAV.search(home.content.decode())
    assert nav is not None, "the home page has no navigation"
    queue = deque((url, "/ (navigation)", 1) for url in ["/", *_links(nav["nav"])])
    seen: set[str] = set()
    broken: dict[str, str] = {}
    while queue and len(seen) < MAX_PAGES:
        url, linked_from, depth = queue.popleft()
        if url in seen:
            continue
        seen.add(url)
        response = client.get(url, follow=True)
        if response.status_code >= 400:
            broken[url] = f"{response.status_code}, linked from {linked_from}"
            continue
        kind = response.get("Content-Type", "")
        if depth < DEPTH and kind.startswith("text/html") and not getattr(response, "streaming", False):
            queue.extend((link, url, depth + 1) for link in _links(response.content.decode()))
    return sorted(seen), broken


def _users() -> dict[str, User]:
    users = {role.value: make_user(f"crawler-{role.value}", [role]) for role in Role}
    users["no role"] = make_user("crawler-norole", [])
    return users


@pytest.mark.parametrize("who", [*(role.value for role in Role), "no role"])
def test_every_link_a_user_is_shown_leads_to_a_page(who: str, portal: Portal) -> None:
    client = Client()
    client.force_login(_users()[who])
    seen, broken = _crawl(client)
    assert broken == {}, f"{who}: {len(broken)} of {len(seen)} links lead nowhere:\n" + "\n".join(
        f"{url}: {answer}" for url, answer in broken.items()
    )
    if who != "no role":
        # The crawl reached past the navigation: a dataset's page, an experiment's, a review request's.
        assert any(url.startswith("/datasets/versions/") for url in seen), seen
        assert any(url.startswith("/approvals/") and url[len("/approvals/") :].rstrip("/").isdigit() for url in seen)


def test_the_navigation_links_every_user_is_shown_are_the_ones_their_roles_open(portal: Portal) -> None:
    users = _users()
    nav = {}
    for who, user in users.items():
        client = Client()
        client.force_login(user)
        match = _NAV.search(client.get("/").content.decode())
        assert match is not None
        nav[who] = set(_links(match["nav"]))
    assert "/account/members/" in nav[Role.ADMIN.value]
    assert all("/account/members/" not in links for who, links in nav.items() if who != Role.ADMIN.value)
    assert all("/activity/" in links for who, links in nav.items() if who != "no role")
    assert "/activity/" not in nav["no role"]
