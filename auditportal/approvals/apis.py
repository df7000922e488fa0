"""The approvals API (docs/approvals.md): review requests and their transitions, one class per
operation, and the gate pipelines ask."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from auditportal.accounts import rules as account_rules
from auditportal.accounts.authentication import GateTokenAuthentication
from auditportal.accounts.models import ApiToken, User
from auditportal.accounts.permissions import request_user
from auditportal.approvals import selectors, services
from auditportal.approvals.models import (
    RequestState,
    ReviewRequest,
    ReviewVote,
    SubjectKind,
    VoteChoice,
    Waiver,
    WaiverState,
)
from auditportal.approvals.rules import ACTIONS, ineligible_voters
from auditportal.evidence import selectors as evidence_selectors
from auditportal.evidence.models import DocumentKind, VerdictDocument
from auditportal.evidence.refs import VerdictDocumentRefSerializer, document_ref
from auditportal.experiments.selectors import run_internals_visible
from auditportal.fairness.documents.report_context import REPORT_STATES
from auditportal.fairness.statistics.stats import Verdict
from auditportal.lib.rest import SessionAuthentication


def request_as_json(
    request: ReviewRequest, *, viewer: User, detail: bool = False, ineligible: Mapping[int, str] | None = None
) -> dict[str, Any]:
    """``viewer``: who asks; the checkpoint's path is a run's internals (experiments.selectors), left
    out of the request and of its events' data for anyone else. ``ineligible``: ineligible_voters'
    answer, if read already (for the detail's tally)."""
    internals = run_internals_visible(user=viewer)
    body: dict[str, Any] = {
        "id": request.pk,
        "title": request.title,
        "intended_use": request.intended_use,
        "model_identifier": request.model_identifier,
        "subject": {
            "type": request.subject_kind,
            "id": request.prediction_audit_id or request.trial_id or request.paired_comparison_id,
            "label": request.subject_label,
        },
        "checkpoint": (request.checkpoint or None) if internals else None,
        "policy_version": request.policy.version,
        "requested_by": request.requested_by.username,
        "created_at": request.created_at.isoformat(),
        "state": request.state,
        "round": request.round,
        "decided_at": request.decided_at.isoformat() if request.decided_at else None,
        "revoked_at": request.revoked_at.isoformat() if request.revoked_at else None,
        "revoked_reason": request.revoked_reason or None,
        "url": request.get_absolute_url(),
    }
    if not detail:
        return body
    documents = selectors.review_request_documents(request=request)
    body["documents"] = [{**document_ref(d), "kind": d.kind, "verdict": d.document.get("verdict")} for d in documents]
    body["document_sha256"] = sorted(d.sha256 for d in documents)
    body["paused"] = selectors.review_request_pause(request=request)
    suspension = selectors.review_request_suspension(request=request)
    body["suspension"] = selectors.suspension_as_json(suspension) if suspension is not None else None
    votes = list(selectors.review_request_votes(request=request))
    body["findings"] = [
        status.as_json()
        for status in selectors.review_request_findings(request=request, documents=documents, votes=votes)
    ]
    body["tally"] = selectors.review_request_tally(request=request, ineligible=ineligible, votes=votes).as_json()
    body["votes"] = [vote_as_json(vote) for vote in votes]
    body["waivers"] = [waiver_as_json(waiver) for waiver in selectors.review_request_waivers(request=request)]
    body["recommendations"] = [
        {
            "id": r.pk,
            "round": r.round,
            "reviewer": r.reviewer.username,
            "choice": r.choice,
            "reason": r.reason,
            "created_at": r.created_at.isoformat(),
        }
        for r in selectors.review_request_recommendations(request=request)
    ]
    body["comments"] = [_thread_as_json(thread) for thread in selectors.review_request_comments(request=request)]
    body["timeline"] = [
        {
            "seq": e.seq,
            "at": e.at.isoformat(),
            "actor": e.actor_username or None,
            "verb": e.verb,
            "data": e.data if internals or not isinstance(e.data, dict) else _without_checkpoint(e.data),
        }
        for e in selectors.review_request_timeline(request=request)
    ]
    body["reports"] = [ref.as_json() for ref in selectors.review_request_report_refs(request=request)]
    return body


def _without_checkpoint(data: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if key != "checkpoint"}


def vote_as_json(vote: ReviewVote) -> dict[str, Any]:
    return {
        "id": vote.pk,
        "round": vote.round,
        "voter": vote.voter.username,
        "choice": vote.choice,
        "reason": vote.reason,
        "document_sha256": vote.document_sha256,
        "acknowledged": [a.finding_key for a in vote.acknowledgements.all()],
        "supersedes": vote.supersedes_id,
        "current": not hasattr(vote, "superseded_by"),
        "cast_at": vote.cast_at.isoformat(),
    }


def waiver_as_json(waiver: Waiver) -> dict[str, Any]:
    scope = waiver.scope()
    return {
        "id": waiver.pk,
        "round": waiver.round,
        # The scope's first comparison, as when a waiver covered one; ``comparisons`` is the scope.
        "finding_key": waiver.finding_key,
        "comparison": waiver.label,
        "document_sha256": waiver.document.sha256,
        "comparisons": [
            {
                "finding_key": comparison.finding_key,
                "document_sha256": comparison.document.sha256,
                "attribute": comparison.attribute,
                "metric": comparison.metric,
                "group": comparison.group,
                "reference": comparison.reference,
                "label": comparison.label,
            }
            for comparison in scope
        ],
        "reason": waiver.reason,
        "compensating_measures": waiver.compensating_measures,
        "expires_at": waiver.expires_at.isoformat(),
        "proposed_by": waiver.proposed_by.username,
        "state": waiver.state,
        "decided_at": waiver.decided_at.isoformat() if waiver.decided_at else None,
        "votes": [
            {"voter": v.voter.username, "choice": v.choice, "reason": v.reason, "cast_at": v.cast_at.isoformat()}
            for v in waiver.votes.all()
        ],
    }


def _thread_as_json(thread: selectors.Thread) -> dict[str, Any]:
    comment = thread.comment
    return {
        "id": comment.pk,
        "author": comment.author.username,
        "body": comment.body,
        "round": comment.round,
        "created_at": comment.created_at.isoformat(),
        "replies": [_thread_as_json(reply) for reply in thread.replies],
    }


# ------------------------------------------------------------------ response bodies, for the schema


class _ReviewSubjectSerializer(serializers.Serializer[Any]):
    type = serializers.ChoiceField(choices=SubjectKind.choices)
    id = serializers.IntegerField(help_text="the prediction audit's or the trial's id")
    label = serializers.CharField()  # type: ignore[assignment]  # a field, not Field.label


class _ReviewRequestSerializer(serializers.Serializer[Any]):
    """A review request (request_as_json)."""

    id = serializers.IntegerField()
    title = serializers.CharField()
    intended_use = serializers.CharField()
    model_identifier = serializers.CharField(allow_blank=True)
    subject = _ReviewSubjectSerializer()
    checkpoint = serializers.CharField(
        allow_null=True,
        help_text="the approved checkpoint's path or UUID; null without one, and for accounts that are neither ML "
        "engineers nor administrators (a run's internals)",
    )
    policy_version = serializers.IntegerField()
    requested_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    state = serializers.ChoiceField(choices=RequestState.choices)
    round = serializers.IntegerField()
    decided_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)
    revoked_reason = serializers.CharField(allow_null=True)
    url = serializers.CharField(help_text="the request's page")


class _DocumentRefSerializer(VerdictDocumentRefSerializer):
    """A review request's verdict document: its ref (evidence.refs), kind and verdict."""

    kind = serializers.ChoiceField(choices=DocumentKind.choices)
    verdict = serializers.ChoiceField(choices=Verdict.choices(), allow_null=True)


class _FindingSerializer(serializers.Serializer[Any]):
    """A judged comparison of a document that did not PASS, and what the round did about it."""

    key = serializers.CharField()
    document_sha256 = serializers.CharField()
    attribute = serializers.CharField()
    metric = serializers.CharField()
    group = serializers.CharField(allow_blank=True)
    reference = serializers.CharField(allow_blank=True)
    verdict = serializers.ChoiceField(choices=Verdict.choices())
    difference = serializers.FloatField(allow_null=True)
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    positives_needed = serializers.IntegerField(allow_null=True)
    needed_reason = serializers.CharField(allow_null=True)
    note = serializers.CharField(allow_null=True)
    label = serializers.CharField()  # type: ignore[assignment]  # a field, not Field.label
    document = serializers.IntegerField()
    waiver = serializers.IntegerField(allow_null=True)
    waived = serializers.BooleanField()
    acknowledged_by = serializers.ListField(child=serializers.CharField())


class _TallySerializer(serializers.Serializer[Any]):
    quorum = serializers.IntegerField()
    approve = serializers.ListField(child=serializers.CharField())
    reject = serializers.ListField(child=serializers.CharField())
    eligible = serializers.ListField(child=serializers.CharField())
    ineligible = serializers.DictField(child=serializers.CharField(), help_text="username: why they may not vote")
    quorum_warning = serializers.CharField(
        allow_null=True,
        help_text="fewer eligible committee members than the quorum: who could vote and why the others cannot; "
        "null when the quorum can be reached (or the request is decided)",
    )


class _VoteSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    round = serializers.IntegerField()
    voter = serializers.CharField()
    choice = serializers.ChoiceField(choices=VoteChoice.choices)
    reason = serializers.CharField(allow_blank=True)
    document_sha256 = serializers.ListField(child=serializers.CharField())
    acknowledged = serializers.ListField(child=serializers.CharField())
    supersedes = serializers.IntegerField(allow_null=True)
    current = serializers.BooleanField()
    cast_at = serializers.DateTimeField()


class _WaiverVoteSerializer(serializers.Serializer[Any]):
    voter = serializers.CharField()
    choice = serializers.ChoiceField(choices=VoteChoice.choices)
    reason = serializers.CharField(allow_blank=True)
    cast_at = serializers.DateTimeField()


class _WaivedComparisonSerializer(serializers.Serializer[Any]):
    finding_key = serializers.CharField()
    document_sha256 = serializers.CharField()
    attribute = serializers.CharField()
    metric = serializers.CharField()
    group = serializers.CharField(allow_blank=True)
    reference = serializers.CharField(allow_blank=True)
    label = serializers.CharField()  # type: ignore[assignment]  # a field, not Field.label


class _WaiverSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    round = serializers.IntegerField()
    finding_key = serializers.CharField(help_text="the first comparison of the scope (the scope: comparisons)")
    comparison = serializers.CharField(help_text="the scope as people read it, by attribute, metric and reference")
    document_sha256 = serializers.CharField(help_text="the document of the scope's first comparison")
    comparisons = _WaivedComparisonSerializer(many=True, help_text="every FAIL comparison the waiver covers")
    reason = serializers.CharField(allow_blank=True)
    compensating_measures = serializers.CharField(allow_blank=True)
    expires_at = serializers.DateTimeField()
    proposed_by = serializers.CharField()
    state = serializers.ChoiceField(choices=WaiverState.choices)
    decided_at = serializers.DateTimeField(allow_null=True)
    votes = _WaiverVoteSerializer(many=True)


class _RecommendationSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    round = serializers.IntegerField()
    reviewer = serializers.CharField()
    choice = serializers.ChoiceField(choices=VoteChoice.choices)
    reason = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()


class _CommentSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    author = serializers.CharField()
    body = serializers.CharField(allow_blank=True)
    round = serializers.IntegerField()
    created_at = serializers.DateTimeField()


# A thread: a comment and its replies, themselves threads.
_CommentSerializer._declared_fields["replies"] = _CommentSerializer(many=True)


class _TimelineEventSerializer(serializers.Serializer[Any]):
    seq = serializers.IntegerField()
    at = serializers.DateTimeField()
    actor = serializers.CharField(allow_null=True)
    verb = serializers.CharField()
    data = serializers.DictField()  # type: ignore[assignment]  # a field, not Serializer.data


class _SuspensionSerializer(serializers.Serializer[Any]):
    """Why a request was suspended (selectors.suspension_as_json)."""

    reason = serializers.CharField()
    cause = serializers.DictField(help_text='what happened, as data: {"kind": "prediction_audit_retired", "id": 5}')
    at = serializers.DateTimeField()
    by = serializers.CharField(allow_null=True, help_text="who caused it; null: the system")
    was = serializers.ChoiceField(choices=RequestState.choices, help_text="the state it was suspended from")
    next = serializers.CharField(help_text="how the model is approved again: a new review request")


class _ReportRefSerializer(serializers.Serializer[Any]):
    """A signed report of the request's decisions: GET its url for the signatures, revisions and PDF."""

    id = serializers.IntegerField()
    decision = serializers.ChoiceField(
        choices=[RequestState.APPROVED.value, RequestState.REJECTED.value, RequestState.REVOKED.value], allow_null=True
    )
    state = serializers.ChoiceField(choices=REPORT_STATES)
    url = serializers.CharField(help_text="the report in the API")


class _ReviewRequestRecordSerializer(_ReviewRequestSerializer):
    """A review request with its documents, findings, votes, waivers and history."""

    documents = _DocumentRefSerializer(many=True)
    document_sha256 = serializers.ListField(child=serializers.CharField())
    paused = serializers.CharField(
        allow_null=True,
        help_text="why the round is paused (a voter's role changed) and who resumes it; null when it is not",
    )
    suspension = _SuspensionSerializer(allow_null=True, help_text="why the request is suspended; null when it is not")
    findings = _FindingSerializer(many=True)
    tally = _TallySerializer()
    votes = _VoteSerializer(many=True)
    waivers = _WaiverSerializer(many=True)
    recommendations = _RecommendationSerializer(many=True)
    comments = _CommentSerializer(many=True)
    timeline = _TimelineEventSerializer(many=True)
    reports = _ReportRefSerializer(
        many=True,
        help_text="the signed reports of its decisions, oldest first; empty until the worker stored the first",
    )


def _documents(request: Request, ids: list[int]) -> list[VerdictDocument]:
    user = request_user(request)
    return [evidence_selectors.verdict_document_get(user=user, document_id=pk) for pk in ids]


def _request(request: Request, request_id: int) -> ReviewRequest:
    return selectors.review_request_get(user=request_user(request), request_id=request_id)


def _detail(request: Request, review_request: ReviewRequest, status: int = 200) -> Response:
    review_request.refresh_from_db()
    return Response(request_as_json(review_request, viewer=request_user(request), detail=True), status=status)


class ReviewRequestListApi(APIView):
    """GET: review requests (``?state=``). POST: a draft (ML engineers and reviewers)."""

    class InputSerializer(serializers.Serializer[Any]):
        title = serializers.CharField()
        intended_use = serializers.CharField()
        documents = serializers.ListField(child=serializers.IntegerField(), allow_empty=False)
        model_identifier = serializers.CharField(required=False, allow_blank=True, default="")

    class OutputSerializer(serializers.Serializer[Any]):
        results = _ReviewRequestSerializer(many=True, help_text="the newest 200")

    @extend_schema(
        parameters=[
            OpenApiParameter("state", str, enum=RequestState.values, description="only requests in this state")
        ],
        responses=OutputSerializer,
    )
    def get(self, request: Request) -> Response:
        user = request_user(request)
        account_rules.check_view(user)
        requests = selectors.review_request_list(user=user, state=request.query_params.get("state") or None)
        return Response({"results": [request_as_json(r, viewer=user) for r in requests[:200]]})

    @extend_schema(request=InputSerializer, responses={201: _ReviewRequestRecordSerializer})
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        created = services.review_request_create(
            user=request_user(request),
            title=data["title"],
            intended_use=data["intended_use"],
            documents=_documents(request, data["documents"]),
            model_identifier=data["model_identifier"],
        )
        return _detail(request, created, status=201)


class ReviewRequestDetailApi(APIView):
    class OutputSerializer(_ReviewRequestRecordSerializer):
        actions = serializers.DictField(
            child=serializers.CharField(allow_null=True),
            help_text=f"per action ({', '.join(ACTIONS)}): null when this account may take it now, or why not",
        )

    @extend_schema(responses=OutputSerializer)
    def get(self, request: Request, request_id: int) -> Response:
        review_request = _request(request, request_id)
        user = request_user(request)
        ineligible = ineligible_voters(review_request)
        body = request_as_json(review_request, viewer=user, detail=True, ineligible=ineligible)
        body["actions"] = selectors.review_request_actions(user=user, request=review_request, ineligible=ineligible)
        return Response(body)


class ReviewRequestReviseApi(APIView):
    class InputSerializer(serializers.Serializer[Any]):
        title = serializers.CharField(required=False)
        intended_use = serializers.CharField(required=False)
        documents = serializers.ListField(child=serializers.IntegerField(), required=False, allow_empty=False)

    @extend_schema(request=InputSerializer, responses=_ReviewRequestRecordSerializer)
    def post(self, request: Request, request_id: int) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        review_request = services.review_request_revise(
            user=request_user(request),
            request=_request(request, request_id),
            title=data.get("title"),
            intended_use=data.get("intended_use"),
            documents=_documents(request, data["documents"]) if "documents" in data else None,
        )
        return _detail(request, review_request)


class ReviewRequestSubmitApi(APIView):
    @extend_schema(request=None, responses=_ReviewRequestRecordSerializer)
    def post(self, request: Request, request_id: int) -> Response:
        return _detail(
            request, services.review_request_submit(user=request_user(request), request=_request(request, request_id))
        )


class ReviewRequestStartReviewApi(APIView):
    @extend_schema(request=None, responses=_ReviewRequestRecordSerializer)
    def post(self, request: Request, request_id: int) -> Response:
        review_request = services.review_request_start_review(
            user=request_user(request), request=_request(request, request_id)
        )
        return _detail(request, review_request)


class _ReasonSerializer(serializers.Serializer[Any]):
    reason = serializers.CharField(required=False, allow_blank=True, default="")


class ReviewRequestRequestChangesApi(APIView):
    @extend_schema(request=_ReasonSerializer, responses=_ReviewRequestRecordSerializer)
    def post(self, request: Request, request_id: int) -> Response:
        serializer = _ReasonSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        review_request = services.review_request_request_changes(
            user=request_user(request),
            request=_request(request, request_id),
            reason=serializer.validated_data["reason"],
        )
        return _detail(request, review_request)


class ReviewRequestWithdrawApi(APIView):
    @extend_schema(request=_ReasonSerializer, responses=_ReviewRequestRecordSerializer)
    def post(self, request: Request, request_id: int) -> Response:
        serializer = _ReasonSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        review_request = services.review_request_withdraw(
            user=request_user(request),
            request=_request(request, request_id),
            reason=serializer.validated_data["reason"],
        )
        return _detail(request, review_request)


class ReviewRequestRevokeApi(APIView):
    @extend_schema(request=_ReasonSerializer, responses=_ReviewRequestRecordSerializer)
    def post(self, request: Request, request_id: int) -> Response:
        serializer = _ReasonSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        review_request = services.review_request_revoke(
            user=request_user(request),
            request=_request(request, request_id),
            reason=serializer.validated_data["reason"],
        )
        return _detail(request, review_request)


class ReviewRequestResumeApi(APIView):
    """Resume a round paused by a role change (a committee member or an administrator other than whose
    role changed and who changed it), saying what was reviewed."""

    @extend_schema(request=_ReasonSerializer, responses=_ReviewRequestRecordSerializer)
    def post(self, request: Request, request_id: int) -> Response:
        serializer = _ReasonSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        review_request = services.review_round_resume(
            user=request_user(request),
            request=_request(request, request_id),
            reason=serializer.validated_data["reason"],
        )
        return _detail(request, review_request)


class ReviewRequestRecommendApi(APIView):
    class InputSerializer(serializers.Serializer[Any]):
        choice = serializers.CharField()
        reason = serializers.CharField(allow_blank=True)

    @extend_schema(request=InputSerializer, responses={201: _ReviewRequestRecordSerializer})
    def post(self, request: Request, request_id: int) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        review_request = _request(request, request_id)
        services.review_request_recommend(
            user=request_user(request), request=review_request, **serializer.validated_data
        )
        return _detail(request, review_request, status=201)


class ReviewCommentApi(APIView):
    class InputSerializer(serializers.Serializer[Any]):
        body = serializers.CharField(allow_blank=True)
        reply_to = serializers.IntegerField(required=False, allow_null=True, default=None)

    @extend_schema(request=InputSerializer, responses={201: _ReviewRequestRecordSerializer})
    def post(self, request: Request, request_id: int) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        review_request = _request(request, request_id)
        parent_id = serializer.validated_data["reply_to"]
        parent = review_request.comments.filter(pk=parent_id).first() if parent_id is not None else None
        if parent_id is not None and parent is None:
            raise Http404("No such comment on this request.")
        services.review_comment_add(
            user=request_user(request), request=review_request, body=serializer.validated_data["body"], parent=parent
        )
        return _detail(request, review_request, status=201)


class ReviewVoteApi(APIView):
    """A signed vote: the voter's password, and the documents' SHA-256s as the voter saw them."""

    class InputSerializer(serializers.Serializer[Any]):
        choice = serializers.CharField()
        reason = serializers.CharField(allow_blank=True)
        password = serializers.CharField(allow_blank=True, trim_whitespace=False, write_only=True)
        document_sha256 = serializers.ListField(child=serializers.CharField())
        acknowledged = serializers.ListField(child=serializers.CharField(), required=False, default=list)
        acknowledge_all = serializers.BooleanField(
            required=False,
            default=False,
            help_text="acknowledge every INCONCLUSIVE comparison the request has now (instead of listing their keys "
            "in acknowledged); each is stored by name with its positives needed",
        )

    class OutputSerializer(serializers.Serializer[Any]):
        vote = _VoteSerializer()
        request = _ReviewRequestSerializer()

    @extend_schema(request=InputSerializer, responses={201: OutputSerializer})
    def post(self, request: Request, request_id: int) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        review_request = _request(request, request_id)
        vote = services.review_vote_cast(
            user=request_user(request), request=review_request, **serializer.validated_data
        )
        return Response(
            {
                "vote": vote_as_json(vote),
                "request": request_as_json(_refreshed(review_request), viewer=request_user(request)),
            },
            status=201,
        )


class WaiverProposeApi(APIView):
    """One waiver of a set of FAIL comparisons: ``finding_keys`` (a list), or ``finding_key`` (one)."""

    class InputSerializer(serializers.Serializer[Any]):
        finding_keys = serializers.ListField(
            child=serializers.CharField(),
            required=False,
            help_text="the FAIL comparisons the waiver covers (their finding keys): one reason, one expiry and "
            "one quorum vote for all of them",
        )
        finding_key = serializers.CharField(required=False, help_text="one comparison (instead of finding_keys)")
        reason = serializers.CharField(allow_blank=True)
        compensating_measures = serializers.CharField(allow_blank=True)
        expires_on = serializers.DateField()

    @extend_schema(request=InputSerializer, responses={201: _WaiverSerializer})
    def post(self, request: Request, request_id: int) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        waiver = services.waiver_propose(
            user=request_user(request), request=_request(request, request_id), **serializer.validated_data
        )
        return Response(waiver_as_json(waiver), status=201)


class WaiverVoteApi(APIView):
    class InputSerializer(serializers.Serializer[Any]):
        choice = serializers.CharField()
        reason = serializers.CharField(allow_blank=True)
        password = serializers.CharField(allow_blank=True, trim_whitespace=False, write_only=True)
        document_sha256 = serializers.ListField(child=serializers.CharField())

    @extend_schema(request=InputSerializer, responses={201: _WaiverSerializer})
    def post(self, request: Request, waiver_id: int) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        waiver = selectors.waiver_get(user=request_user(request), waiver_id=waiver_id)
        services.waiver_vote_cast(user=request_user(request), waiver=waiver, **serializer.validated_data)
        waiver.refresh_from_db()
        return Response(waiver_as_json(waiver), status=201)


class GateApi(APIView):
    """``GET /api/v1/gate/?model=<identifier>``: is this model approved? For deployment pipelines, with a
    gate token (``Authorization: Token ...``); members may ask too. 404 for a model no request names."""

    authentication_classes = [GateTokenAuthentication, SessionAuthentication]
    permission_classes = [AllowAny]  # checked below: a gate token, or a logged-in member

    class OutputSerializer(serializers.Serializer[Any]):
        approved = serializers.BooleanField()
        request = serializers.IntegerField(help_text="the review request the answer comes from")
        state = serializers.ChoiceField(choices=RequestState.choices)
        decided_at = serializers.DateTimeField(allow_null=True)
        document_sha256 = serializers.ListField(child=serializers.CharField())
        policy_version = serializers.IntegerField()
        expires = serializers.DateTimeField(allow_null=True, help_text="when the approval lapses; null: never")
        revoked_at = serializers.DateTimeField(allow_null=True)
        suspension = _SuspensionSerializer(
            allow_null=True, help_text="why the approval was suspended and how it comes back; null unless suspended"
        )

    class UnknownModelSerializer(serializers.Serializer[Any]):
        detail = serializers.CharField()
        model = serializers.CharField()

    @extend_schema(
        parameters=[OpenApiParameter("model", str, required=True, description="the model identifier")],
        responses={
            200: OutputSerializer,
            404: OpenApiResponse(UnknownModelSerializer, description="No review request names the model."),
        },
    )
    def get(self, request: Request) -> Response:
        if not isinstance(request.auth, ApiToken):
            user = request.user
            if not user.is_authenticated:
                raise exceptions.NotAuthenticated("Send a gate token: Authorization: Token <token>.")
            account_rules.check_view(request_user(request))
        model = (request.query_params.get("model") or "").strip()
        if not model:
            return Response({"detail": "Name the model: ?model=<identifier>.", "field": "model"}, status=400)
        answer = selectors.gate_answer(model_identifier=model)
        if answer is None:
            return Response({"detail": f"No review request names the model {model!r}.", "model": model}, status=404)
        return Response(answer.as_json())


def _refreshed(review_request: ReviewRequest) -> ReviewRequest:
    review_request.refresh_from_db()
    return review_request
