"""The activity log for members: its events, newest first, searchable, and the chain's last verification."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from auditportal.activity import rules, selectors, services
from auditportal.activity.forms import EventSearchForm
from auditportal.activity.models import Event
from auditportal.activity.presentation import event_rows
from auditportal.fairness.errors import UserError
from auditportal.lib.http import see_other

if TYPE_CHECKING:
    from django.contrib.auth.models import _User as User

EVENTS_PER_PAGE = 50


def _viewer(request: HttpRequest) -> User:
    """The logged-in member (403 for an account without a role)."""
    rules.check_read_log(request.user)
    return cast("User", request.user)


@login_required
@require_GET
def event_log(request: HttpRequest) -> HttpResponse:
    viewer = _viewer(request)
    searched = any(name in request.GET for name in EventSearchForm.base_fields)
    form = EventSearchForm(request.GET if searched else None)
    wanted: dict[str, Any] = {}
    if form.is_bound:
        form.is_valid()  # a value that is not one is named on its field; the others still narrow the list
        wanted = {name: value for name, value in form.cleaned_data.items() if value}
    events = selectors.event_list(viewer=viewer, **wanted)
    page = Paginator(events, EVENTS_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "form": form,
        "searched": bool(wanted),
        "page": page,
        "rows": event_rows(page.object_list, viewer=viewer),
        "verification": _verification(selectors.chain_verification_last()),
    }
    return render(request, "activity/log.html", context, status=400 if form.errors else 200)


@dataclass(frozen=True)
class Verification:
    """The newest recorded verification in words (no verification runs when the page loads)."""

    ok: bool
    headline: str
    detail: str
    at: datetime
    by: str


def _verification(event: Event | None) -> Verification | None:
    if event is None:
        return None
    data = event.data if isinstance(event.data, dict) else {}
    since = selectors.events_after(event.seq)
    later = f"{since:,} event{'s' if since != 1 else ''} written since."
    by = event.actor_username or "the system"
    if data.get("ok"):
        return Verification(
            ok=True,
            headline="The chain holds",
            detail=f"{data.get('events', 0):,} events, up to seq {data.get('head_seq')}, verified in "
            f"{data.get('seconds')} s. {later}",
            at=event.at,
            by=by,
        )
    return Verification(
        ok=False,
        headline=f"The chain is broken at event seq {data.get('broken_at_seq')}",
        detail=f"{data.get('problem')}. {data.get('events', 0):,} events before it verify. {later}",
        at=event.at,
        by=by,
    )


@login_required
@require_POST
def chain_verify(request: HttpRequest) -> HttpResponse:
    viewer = _viewer(request)
    try:
        recorded = services.chain_verification_run(by=viewer)
    except UserError as exc:
        messages.error(request, str(exc))
    else:
        if recorded.data.get("ok"):
            messages.success(
                request,
                f"The chain holds: {recorded.data['events']:,} events verified in {recorded.data['seconds']} s.",
            )
        else:
            messages.error(
                request,
                f"The chain is broken at event seq {recorded.data['broken_at_seq']}: {recorded.data['problem']}",
            )
    return see_other("activity:log")
