"""The approval pages (docs/approvals.md, "Pages"): the review queue, the request form and the request
page with its actions. Each view validates what was posted, calls one service, and goes back to the
request page; who may do what is the services' (and rules.py's) business: a refusal for the role or
the separation of duties is a 403 with its sentence; a wrong state or a missing field goes back to the
page too (303, lib/forms.form_failed_redirect), which shows the form again with the service's message,
so the address bar never stays on an action's URL."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from auditportal.accounts import rules as account_rules
from auditportal.accounts.models import User
from auditportal.accounts.permissions import request_user
from auditportal.activity.models import Event, Verb
from auditportal.approvals import notifications, rules, selectors, services
from auditportal.approvals.forms import (
    CommentForm,
    ReasonForm,
    RecommendForm,
    ReviewRequestCreateForm,
    ReviewRequestReviseForm,
    VoteForm,
    WaiverProposeForm,
    WaiverVoteForm,
)
from auditportal.approvals.models import RequestState, ReviewRequest, Waiver, WaiverState
from auditportal.evidence.selectors import verdict_document_forest, verdict_document_references
from auditportal.experiments.selectors import run_internals_visible
from auditportal.fairness.documents.findings import FAIL, INCONCLUSIVE
from auditportal.fairness.errors import UserError
from auditportal.lib.forms import add_user_error, form_failed_redirect, form_failed_restore
from auditportal.lib.params import as_id

REQUESTS_PER_PAGE = 25


def _member(request: HttpRequest) -> User:
    user = request_user(request)
    account_rules.check_view(user)
    return user


@login_required
def review_queue(request: HttpRequest) -> HttpResponse:
    user = _member(request)
    return render(request, "approvals/queue.html", {"queue": selectors.review_queue(user=user)})


@login_required
def review_request_list(request: HttpRequest) -> HttpResponse:
    user = _member(request)
    state = request.GET.get("state") or ""
    if state not in RequestState.values:
        state = ""
    requests = selectors.review_request_list(user=user, state=state or None)
    page = Paginator(requests, REQUESTS_PER_PAGE).get_page(request.GET.get("page"))
    return render(
        request, "approvals/list.html", {"requests": page, "page": page, "state": state, "states": RequestState.choices}
    )


def _id_param(params: QueryDict, name: str) -> int | None:
    value = params.get(name)
    if value is None or value == "":
        return None
    given = as_id(value)
    if given is None:
        raise Http404(f"No such {name}.")
    return given


@login_required
@require_http_methods(["GET", "POST"])
def review_request_new(request: HttpRequest) -> HttpResponse:
    """The form to request a review of one subject, named in the query string: ``?audit=``, ``?trial=``,
    ``?comparison=`` or ``?document=`` (the "Request review" links of the audit, experiment, comparison
    and document pages)."""
    user = request_user(request)
    subject = selectors.review_request_subject(
        user=user,
        audit_id=_id_param(request.GET, "audit"),
        trial_id=_id_param(request.GET, "trial"),
        document_id=_id_param(request.GET, "document"),
        comparison_id=_id_param(request.GET, "comparison"),
    )
    rules.check_create(user)
    if subject is None:
        return render(request, "approvals/new.html", {"subject": None, "form": None})
    form = ReviewRequestCreateForm(request.POST or None, subject=subject)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            created = services.review_request_create(
                user=user,
                title=data["title"],
                intended_use=data["intended_use"],
                documents=data["documents"],
                model_identifier=data["model_identifier"],
            )
        except UserError as exc:
            add_user_error(form, exc)
        else:
            messages.success(request, f"Review request #{created.pk} is a draft: check it, then submit it.")
            return redirect(created)
    context = {"subject": subject, "form": form, "show_checkpoint": run_internals_visible(user=user)}
    return render(request, "approvals/new.html", context, status=400 if form.errors else 200)


# -- the request page ----------------------------------------------------------------------------


@dataclass
class WaiverRow:
    waiver: Waiver
    votes: list[Any]
    tally: selectors.Tally | None
    # Whether the page offers the vote form (a proposed waiver of the current round, the user may vote).
    votable: bool
    form: WaiverVoteForm | None


@dataclass
class GroupRow:
    """A group of findings (one attribute and metric) on the page, with its "waive these" form."""

    group: selectors.FindingGroup
    waive_form: WaiverProposeForm | None


def _page(request: HttpRequest, review_request: ReviewRequest) -> HttpResponse:
    user = request_user(request)
    failed = form_failed_restore(request)
    bound: dict[str, forms.Form] = {}
    error = failed.error if failed is not None else None
    # Each read once and handed to the selectors that need it: who may not vote (the separation of
    # duties reads the evidence's makers) for the actions and every tally, the documents and the votes.
    ineligible = rules.ineligible_voters(review_request)
    actions = selectors.review_request_actions(user=user, request=review_request, ineligible=ineligible)
    documents = selectors.review_request_documents(request=review_request)
    votes = list(selectors.review_request_votes(request=review_request))
    tally = selectors.review_request_tally(request=review_request, ineligible=ineligible, votes=votes)
    hashes = sorted(document.sha256 for document in documents)
    findings = selectors.review_request_findings(request=review_request, documents=documents, votes=votes)
    fails = [status for status in findings if status.finding.verdict == FAIL]
    inconclusive = [status for status in findings if status.finding.verdict == INCONCLUSIVE]
    waivable = [status for status in fails if status.waiver is None]
    current_round = review_request.round
    if failed is not None and failed.name in _FORMS:
        bound[failed.name] = failed.bind(
            _FORMS[failed.name](failed.data, hashes, inconclusive, fails, review_request, user)
        )

    waiver_rows = []
    for waiver in selectors.review_request_waivers(request=review_request):
        live = waiver.state == WaiverState.PROPOSED and waiver.round == current_round
        form = None
        if live and actions["vote_waiver"] is None:
            prefix = f"waiver-{waiver.pk}"
            if failed is not None and failed.name == prefix:
                form = failed.bind(WaiverVoteForm(failed.data, hashes=hashes, prefix=prefix))
            else:
                form = WaiverVoteForm(hashes=hashes, prefix=prefix)
        waiver_votes = list(waiver.votes.all())  # review_request_waivers read them
        waiver_rows.append(
            WaiverRow(
                waiver=waiver,
                votes=waiver_votes,
                tally=selectors.waiver_tally(waiver=waiver, base=tally, ineligible=ineligible, votes=waiver_votes)
                if live
                else None,
                votable=form is not None,
                form=form,
            )
        )

    my_vote = next(
        (
            vote
            for vote in selectors.review_request_current_votes(request=review_request, votes=votes)
            if vote.voter_id == user.pk
        ),
        None,
    )

    internals = run_internals_visible(user=user)
    reply_to = _reply_to(bound.get("comment"))
    threads = selectors.review_request_comments(request=review_request)
    if reply_to is not None and reply_to not in _comment_ids(threads):
        reply_to = None  # no such comment here: the errors show on the form at the bottom

    def offered(name: str, make: Callable[[], forms.Form]) -> forms.Form | None:
        if name in bound:
            return bound[name]
        return make() if actions[_ACTION_OF_FORM[name]] is None else None

    may_waive = actions["propose_waiver"] is None
    groups = [
        GroupRow(
            group=group,
            waive_form=WaiverProposeForm(fails=group.waivable, hidden=True, auto_id=f"id_{group.slug}_%s")
            if may_waive and group.waivable
            else None,
        )
        for group in selectors.review_request_finding_groups(
            request=review_request, statuses=findings, documents=documents
        )
    ]
    paused = selectors.review_request_pause(request=review_request)
    # Resuming is offered, or its refusal explained, only while the round is paused.
    workflow = (*_WORKFLOW, "resume") if paused else _WORKFLOW
    decided = review_request.state in _DECIDED
    suspended = review_request.state == RequestState.SUSPENDED
    report_links = selectors.review_request_report_links(request=review_request) if decided or suspended else []
    context = {
        "r": review_request,
        "actions": actions,
        # The sections (votes, waivers, recommendations, comments) say inline why their form is missing.
        "any_action": any(actions[name] is None for name in workflow),
        "refused": {name: why for name, why in actions.items() if why is not None and name in workflow},
        "documents": [
            (
                document,
                verdict_document_forest(document=document),
                verdict_document_references(document=document),
            )
            for document in documents
        ],
        "hashes": hashes,
        "fails": fails,
        "inconclusive": inconclusive,
        "groups": groups,
        "counts": {
            "fail": len(fails),
            "waived": sum(status.waived for status in fails),
            "inconclusive": len(inconclusive),
            "pass": sum(row.group.passes for row in groups),
        },
        "tally": tally,
        "submission_mail": selectors.review_request_submission_mail(request=review_request)
        if review_request.round
        else None,
        "votes": votes,
        "current_round_votes": [vote for vote in votes if vote.round == current_round],
        "earlier_votes": [vote for vote in votes if vote.round != current_round],
        "my_vote": my_vote,
        "waiver_rows": waiver_rows,
        "recommendations": list(selectors.review_request_recommendations(request=review_request)),
        "threads": threads,
        "timeline": [
            (event, _event_details(event, internals=internals))
            for event in selectors.review_request_timeline(request=review_request)
        ],
        "show_checkpoint": internals,
        "error": error,
        "vote_form": offered("vote", lambda: VoteForm(hashes=hashes, inconclusive=inconclusive)),
        "waiver_form": offered("waiver", lambda: WaiverProposeForm(fails=waivable)),
        "recommend_form": offered("recommend", RecommendForm),
        # A failed reply opens under its comment with the errors; the form at the bottom stays empty.
        "comment_form": CommentForm() if reply_to is not None else offered("comment", CommentForm),
        "reply_form": bound.get("comment") if reply_to is not None else None,
        "changes_form": offered("request_changes", lambda: ReasonForm(prefix="request_changes")),
        "withdraw_form": offered("withdraw", lambda: ReasonForm(prefix="withdraw")),
        "revoke_form": offered("revoke", lambda: ReasonForm(prefix="revoke")),
        "resume_form": offered("resume", lambda: ReasonForm(prefix="resume")),
        "paused": paused,
        "suspension": selectors.review_request_suspension(request=review_request),
        "suspension_next": services.SUSPENSION_NEXT,
        "revise_form": offered(
            "revise",
            lambda: ReviewRequestReviseForm(
                initial={"title": review_request.title, "intended_use": review_request.intended_use},
                documents=_subject_documents(user, review_request),
                chosen=[document.pk for document in documents],
            ),
        ),
        "reply_to": reply_to,
        "waivable": waivable,
        "decided": decided,
        "report_links": report_links,
        "status_url": reverse("approvals:status", args=[review_request.pk]),
    }
    return render(request, "approvals/request.html", context)


# The states whose decision leaves a signed report (approvals.services.decision).
_DECIDED = (RequestState.APPROVED, RequestState.REJECTED, RequestState.REVOKED)


def _revise_form(data: QueryDict, user: User, r: ReviewRequest) -> forms.Form:
    return ReviewRequestReviseForm(data, documents=_subject_documents(user, r), chosen=[])


# How each form of the page is made again from what was posted (for a failed one, restored with its
# errors): (data, hashes, inconclusive, fails, request, user) -> form.
_FORMS: dict[str, Callable[..., forms.Form]] = {
    "vote": lambda data, hashes, inconclusive, fails, r, user: VoteForm(data, hashes=hashes, inconclusive=inconclusive),
    "waiver": lambda data, hashes, inconclusive, fails, r, user: WaiverProposeForm(data, fails=fails),
    "recommend": lambda data, *rest: RecommendForm(data),
    "comment": lambda data, *rest: CommentForm(data),
    "request_changes": lambda data, *rest: ReasonForm(data, prefix="request_changes"),
    "withdraw": lambda data, *rest: ReasonForm(data, prefix="withdraw"),
    "revoke": lambda data, *rest: ReasonForm(data, prefix="revoke"),
    "resume": lambda data, *rest: ReasonForm(data, prefix="resume"),
    "revise": lambda data, hashes, inconclusive, fails, r, user: _revise_form(data, user, r),
}


_WORKFLOW = ("revise", "submit", "start_review", "request_changes", "withdraw", "revoke")

# Which action (rules.ACTIONS) each form of the page belongs to.
_ACTION_OF_FORM = {
    "vote": "vote",
    "waiver": "propose_waiver",
    "recommend": "recommend",
    "comment": "comment",
    "request_changes": "request_changes",
    "withdraw": "withdraw",
    "revoke": "revoke",
    "resume": "resume",
    "revise": "revise",
}


def _reply_to(form: forms.Form | None) -> int | None:
    """The comment a failed reply answered: its form opens there, with the errors."""
    if form is None or not form.is_bound:
        return None
    parent = form.data.get("parent")
    return as_id(parent)


def _comment_ids(threads: list[selectors.Thread]) -> set[int]:
    ids: set[int] = set()
    for thread in threads:
        ids.add(thread.comment.pk)
        ids |= _comment_ids(thread.replies)
    return ids


# What the timeline shows of an event's data, in this order.
_DETAILS = (
    ("from", "from"),
    ("to", "to"),
    ("round", "round"),
    ("choice", "choice"),
    ("comparison", "comparison"),
    ("reason", "reason"),
    ("compensating_measures", "compensating measures"),
    ("expires_at", "expires"),
    ("quorum", "quorum"),
    ("approve", "approve"),
    ("reject", "reject"),
    ("document_sha256", "documents"),
    ("documents", "documents"),
    ("policy", "policy version"),
    ("checkpoint", "checkpoint"),
)


def _event_details(event: Event, *, internals: bool) -> list[tuple[str, str]]:
    """``internals``: whether the viewer sees a run's internals (the checkpoint's path)."""
    data = event.data if isinstance(event.data, dict) else {}
    details: list[tuple[str, str]] = []
    for key, label in _DETAILS:
        if key == "checkpoint" and not internals:
            continue
        value = data.get(key)
        if value is None or value == "" or value == []:
            continue
        if key in ("from", "to") and value in RequestState.values:
            text = RequestState(value).label.lower()
        elif key in ("document_sha256", "documents"):
            value = [value] if isinstance(value, str) else value
            text = ", ".join(str(h)[:12] for h in value)
        elif isinstance(value, list):
            text = ", ".join(map(str, value))
        else:
            text = str(value)
        details.append((label, text))
    acknowledged = data.get("acknowledged")
    if acknowledged:
        details.append(("acknowledged", "; ".join(str(item.get("comparison")) for item in acknowledged)))
    if event.verb == Verb.REVIEW_REQUEST_REVISED:
        details.append(("changed", ", ".join(sorted((data.get("changes") or {}).keys()))))
    return details


@login_required
def review_request_detail(request: HttpRequest, request_id: int) -> HttpResponse:
    return _page(request, selectors.review_request_get(user=request_user(request), request_id=request_id))


def _act(
    request: HttpRequest,
    request_id: int,
    name: str,
    make_form: Callable[[ReviewRequest], forms.Form] | None,
    call: Callable[[User, ReviewRequest, dict[str, Any]], object],
    success: str | Callable[[ReviewRequest], str],
    anchor: str = "",
) -> HttpResponse:
    """Validate the posted form (if any), call the service, and go back to the request page (to
    ``anchor``); a form that fails, or a service's UserError, goes back there too (303), where the
    form shows again with the message on its field (or above the actions), its password left out."""
    user = request_user(request)
    review_request = selectors.review_request_get(user=user, request_id=request_id)
    form = make_form(review_request) if make_form is not None else None
    url = review_request.get_absolute_url()
    if form is None or form.is_valid():
        try:
            call(user, review_request, form.cleaned_data if form is not None else {})
        except UserError as exc:
            if form is None:
                return form_failed_redirect(request, url=url, name=name, error=str(exc), anchor="#action-error")
            add_user_error(form, exc)
        else:
            messages.success(
                request, success(review_request) if callable(success) else success.format(pk=review_request.pk)
            )
            return redirect(url + anchor)
    return form_failed_redirect(request, url=url, name=name, form=form, anchor=_FAILED_ANCHOR.get(name, anchor))


# Where the page opens on a failed form: the form itself.
_FAILED_ANCHOR = {
    "vote": "#vote-form",
    "waiver": "#propose-waiver",
    "recommend": "#recommend",
    "comment": "#comment-form",
    "request_changes": "#request-changes",
    "withdraw": "#withdraw",
    "revoke": "#revoke",
    "resume": "#resume",
    "revise": "#revise",
}


def _submitted(review_request: ReviewRequest) -> str:
    """Who will hear of the submission: the mail goes out once the worker runs it, so the page says
    "will be told", naming who, and who will not (no e-mail address); the request page says "has been
    told" once the mail has gone out."""
    told, untold = notifications.submission_recipients(request=review_request)
    text = f"Review request #{review_request.pk} is submitted."
    if told:
        text += f" The committee will be told by e-mail: {', '.join(member.username for member in told)}."
    else:
        text += " No committee member who may vote on it has an e-mail address: nobody will be told by e-mail."
    if untold:
        text += f" Not notified (no e-mail address): {', '.join(member.username for member in untold)}."
    return text


def _requester_told(review_request: ReviewRequest, done: str) -> str:
    requester = review_request.requested_by
    if requester.email:
        return f"{done} {requester.username} will be told by e-mail."
    return f"{done} {requester.username} has no e-mail address: tell them yourself (not notified by e-mail)."


@login_required
@require_POST
def review_request_submit(request: HttpRequest, request_id: int) -> HttpResponse:
    return _act(
        request,
        request_id,
        "submit",
        None,
        lambda user, r, data: services.review_request_submit(user=user, request=r),
        _submitted,
    )


@login_required
@require_POST
def review_request_start_review(request: HttpRequest, request_id: int) -> HttpResponse:
    return _act(
        request,
        request_id,
        "start_review",
        None,
        lambda user, r, data: services.review_request_start_review(user=user, request=r),
        "Review request #{pk} is in review: the committee may vote.",
    )


@login_required
@require_POST
def review_request_revise(request: HttpRequest, request_id: int) -> HttpResponse:
    def make(r: ReviewRequest) -> forms.Form:
        return ReviewRequestReviseForm(request.POST, documents=_subject_documents(request_user(request), r), chosen=[])

    return _act(
        request,
        request_id,
        "revise",
        make,
        lambda user, r, data: services.review_request_revise(
            user=user, request=r, title=data["title"], intended_use=data["intended_use"], documents=data["documents"]
        ),
        "Review request #{pk} is revised.",
    )


def _subject_documents(user: User, r: ReviewRequest) -> list[Any]:
    subject = selectors.review_request_subject(
        user=user, audit_id=r.prediction_audit_id, trial_id=r.trial_id, comparison_id=r.paired_comparison_id
    )
    return subject.documents if subject is not None else []


def _reason_action(
    service: Callable[..., object], name: str, success: str | Callable[[ReviewRequest], str]
) -> Callable[[HttpRequest, int], HttpResponse]:
    @login_required
    @require_POST
    def view(request: HttpRequest, request_id: int) -> HttpResponse:
        return _act(
            request,
            request_id,
            name,
            lambda r: ReasonForm(request.POST, prefix=name),
            lambda user, r, data: service(user=user, request=r, reason=data["reason"]),
            success,
        )

    return view


review_request_request_changes = _reason_action(
    services.review_request_request_changes,
    "request_changes",
    lambda r: _requester_told(r, f"Review request #{r.pk} is back in draft with what to change."),
)
review_request_withdraw = _reason_action(
    services.review_request_withdraw, "withdraw", "Review request #{pk} is withdrawn."
)
review_request_revoke = _reason_action(
    services.review_request_revoke,
    "revoke",
    lambda r: _requester_told(
        r, f"The approval of review request #{r.pk} is revoked: the gate answers approved: false."
    ),
)
review_round_resume = _reason_action(
    services.review_round_resume,
    "resume",
    "The round of review request #{pk} is resumed: the committee may vote again; the votes cast stand.",
)


@login_required
@require_POST
def review_request_recommend(request: HttpRequest, request_id: int) -> HttpResponse:
    return _act(
        request,
        request_id,
        "recommend",
        lambda r: RecommendForm(request.POST),
        lambda user, r, data: services.review_request_recommend(
            user=user, request=r, choice=data["choice"], reason=data["reason"]
        ),
        "Your recommendation on review request #{pk} is recorded.",
        "#recommendations",
    )


@login_required
@require_POST
def review_comment_add(request: HttpRequest, request_id: int) -> HttpResponse:
    def call(user: User, r: ReviewRequest, data: dict[str, Any]) -> object:
        parent = None
        if data["parent"] is not None:
            parent = r.comments.filter(pk=data["parent"]).first()
            if parent is None:
                raise services.ApprovalError(
                    f"Comment #{data['parent']} is not a comment on review request #{r.pk}.", field="body"
                )
        return services.review_comment_add(user=user, request=r, body=data["body"], parent=parent)

    return _act(
        request, request_id, "comment", lambda r: CommentForm(request.POST), call, "Comment added.", "#comments"
    )


@login_required
@require_POST
def review_vote_cast(request: HttpRequest, request_id: int) -> HttpResponse:
    def make(r: ReviewRequest) -> forms.Form:
        findings = selectors.review_request_findings(request=r)
        return VoteForm(
            request.POST,
            hashes=sorted(d.sha256 for d in selectors.review_request_documents(request=r)),
            inconclusive=[s for s in findings if s.finding.verdict == INCONCLUSIVE],
        )

    return _act(
        request,
        request_id,
        "vote",
        make,
        lambda user, r, data: services.review_vote_cast(
            user=user,
            request=r,
            choice=data["choice"],
            reason=data["reason"],
            password=data["password"],
            document_sha256=data["document_sha256"],
            acknowledged=data["acknowledged"],
        ),
        _voted,
        "#votes",
    )


def _voted(review_request: ReviewRequest) -> str:
    text = f"Your vote on review request #{review_request.pk} is recorded, signed with your password."
    state = ReviewRequest.objects.values_list("state", flat=True).get(pk=review_request.pk)
    if state in _DECIDED:
        text += (
            f" It decided the request: {RequestState(state).label.lower()}. The signed report is being generated;"
            " its link appears on this page as soon as it exists."
        )
    return text


@login_required
@require_POST
def waiver_propose(request: HttpRequest, request_id: int) -> HttpResponse:
    """One waiver of the FAIL comparisons posted (``waiver-finding_keys``): a whole attribute and
    metric from its group's button, or those ticked in the form."""

    def make(r: ReviewRequest) -> forms.Form:
        fails = [s for s in selectors.review_request_findings(request=r) if s.finding.verdict == FAIL]
        return WaiverProposeForm(request.POST, fails=fails)

    def success(r: ReviewRequest) -> str:
        count = len(request.POST.getlist("waiver-finding_keys"))
        return (
            f"The waiver of {count:,} FAIL comparison{'' if count == 1 else 's'} is proposed: the committee votes "
            "on it once, for all of them."
        )

    return _act(
        request,
        request_id,
        "waiver",
        make,
        lambda user, r, data: services.waiver_propose(
            user=user,
            request=r,
            finding_keys=data["finding_keys"],
            reason=data["reason"],
            compensating_measures=data["compensating_measures"],
            expires_on=data["expires_on"],
        ),
        success,
        "#waivers",
    )


@login_required
@require_POST
def waiver_vote_cast(request: HttpRequest, waiver_id: int) -> HttpResponse:
    user = request_user(request)
    waiver = selectors.waiver_get(user=user, waiver_id=waiver_id)
    review_request = selectors.review_request_get(user=user, request_id=waiver.request_id)
    hashes = sorted(d.sha256 for d in selectors.review_request_documents(request=review_request))
    prefix = f"waiver-{waiver.pk}"
    form = WaiverVoteForm(request.POST, hashes=hashes, prefix=prefix)
    url = review_request.get_absolute_url()
    if form.is_valid():
        data = form.cleaned_data
        try:
            services.waiver_vote_cast(
                user=user,
                waiver=waiver,
                choice=data["choice"],
                reason=data["reason"],
                password=data["password"],
                document_sha256=data["document_sha256"],
            )
        except UserError as exc:
            add_user_error(form, exc)
        else:
            messages.success(request, f"Your vote on waiver #{waiver.pk} is recorded, signed with your password.")
            return redirect(url + "#waivers")
    return form_failed_redirect(request, url=url, name=prefix, form=form, anchor=f"#waiver-{waiver.pk}")


@login_required
@require_GET
def review_request_status(request: HttpRequest, request_id: int) -> JsonResponse:
    """What the request page's script (static/js/approvals-request.js) polls after a decision: the
    state, and the signed reports that exist so far (empty while the worker generates the first)."""
    review_request = selectors.review_request_get(user=request_user(request), request_id=request_id)
    reports = selectors.review_request_report_links(request=review_request)
    return JsonResponse(
        {
            "state": review_request.state,
            "decided_at": review_request.decided_at.isoformat() if review_request.decided_at else None,
            "reports": [link.as_json() for link in reports],
        }
    )
