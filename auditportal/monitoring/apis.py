"""The deployments' API (docs/monitoring.md): the list, a deployment's status (what a rollout
controller polls), promotions, its monitor policy with the proposals that loosen it, and its webhooks
(administrators).

A deployment's name keeps its slashes in the URL; what acts on it follows ``/-/`` (names.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.http import Http404
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from auditportal.accounts.authentication import AnyTokenAuthentication
from auditportal.accounts.models import ApiToken, TokenScope, User
from auditportal.accounts.permissions import request_user
from auditportal.fairness.files.tabular import file_sha256
from auditportal.lib.rest import DefaultPagination, SessionAuthentication, refuse_rejected_upload
from auditportal.lib.uploads import accepts_uploads, received_sha256
from auditportal.monitoring import rules, selectors, services
from auditportal.monitoring.models import (
    BatchFormat,
    BatchState,
    ChangeKind,
    Deployment,
    DeploymentState,
    Look,
    MonitorPolicy,
    MonitorPolicyProposal,
    PredictionBatch,
    WebhookDeliveryStatus,
    WebhookEndpoint,
)
from auditportal.monitoring.services.webhooks import EVENTS, MAX_DESCRIPTION, MAX_URL
from auditportal.monitoring.spec import BOUNDS, METRICS, REFERENCE_RULES
from auditportal.policies.selectors import PROPOSAL_STATES


def deployment_as_json(deployment: Deployment) -> dict[str, Any]:
    """A deployment as the list shows it (its status without the gate's answer and the history)."""
    return {
        "name": deployment.name,
        "url": _url(deployment.name),
        "description": deployment.description,
        "model": deployment.model_identifier or None,
        "state": deployment.state,
        "since": deployment.since.isoformat() if deployment.since is not None else None,
        "reason": deployment.reason,
        "review_request": deployment.review_request_id,
    }


def policy_as_json(policy: MonitorPolicy, *, active: MonitorPolicy) -> dict[str, Any]:
    return {
        "version": policy.version,
        "spec": policy.spec,
        "reason": policy.reason,
        "created_by": policy.created_by.username,
        "confirmed_by": policy.confirmed_by.username if policy.confirmed_by else None,
        "proposal": policy.proposal_id,
        "created_at": policy.created_at.isoformat(),
        "active": policy.pk == active.pk,
    }


def proposal_as_json(proposal: MonitorPolicyProposal, *, active: MonitorPolicy) -> dict[str, Any]:
    closure = getattr(proposal, "closure", None)
    policy = getattr(proposal, "policy", None)
    return {
        "id": proposal.pk,
        "state": selectors.monitor_policy_proposal_state(proposal, active=active),
        "base_version": proposal.base.version,
        "spec": proposal.spec,
        "loosens": list(proposal.loosens),
        "reason": proposal.reason,
        "proposed_by": proposal.proposed_by.username,
        "proposed_at": proposal.proposed_at.isoformat(),
        "closed_by": closure.closed_by.username if closure is not None else None,
        "closed_at": closure.closed_at.isoformat() if closure is not None else None,
        "version": policy.version if policy is not None else None,
    }


class _DeploymentSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    url = serializers.CharField(help_text="this deployment's status: GET it")
    description = serializers.CharField(allow_blank=True)
    model = serializers.CharField(
        allow_null=True, help_text="the model identifier that should serve now; null: none may (empty, suspended)"
    )
    state = serializers.ChoiceField(
        choices=DeploymentState.choices,
        help_text=(
            "serving: the model promoted last; rolled_back: an earlier approved model, after the last one lost "
            "its approval or breached its monitor; suspended: no model may serve; empty: nothing promoted yet"
        ),
    )
    since = serializers.DateTimeField(allow_null=True, help_text="when this state began")
    reason = serializers.CharField(
        allow_blank=True, help_text="why: the promotion's note, the breach, the lost approval"
    )
    review_request = serializers.IntegerField(allow_null=True, help_text="the approved request the model rests on")


class _PreviousSerializer(serializers.Serializer[Any]):
    change = serializers.ChoiceField(choices=ChangeKind.choices)
    model = serializers.CharField(allow_null=True, help_text="what served after this change; null: nothing")
    at = serializers.DateTimeField()
    reason = serializers.CharField()
    review_request = serializers.IntegerField(allow_null=True)
    incident = serializers.IntegerField(allow_null=True)


class _DeploymentStatusSerializer(_DeploymentSerializer):
    approved = serializers.BooleanField(
        allow_null=True,
        help_text="the gate's answer about model now (null without a model); false until the reconciliation "
        "rolls the deployment back",
    )
    monitor_policy_version = serializers.IntegerField()
    previous = _PreviousSerializer(
        many=True, help_text=f"the changes before the current one, newest first (at most {selectors.PREVIOUS_SHOWN})"
    )


class _MetricLimitsSerializer(serializers.Serializer[Any]):
    upper = serializers.FloatField(allow_null=True)
    lower = serializers.FloatField(allow_null=True)
    gap = serializers.FloatField(allow_null=True, help_text="against the reference group")


class _LimitsSerializer(serializers.Serializer[Any]):
    fnr = _MetricLimitsSerializer()
    fpr = _MetricLimitsSerializer()
    selection_rate = _MetricLimitsSerializer()


class _MonitorSpecSerializer(serializers.Serializer[Any]):
    schema = serializers.IntegerField()
    limits = _LimitsSerializer(help_text="per metric, for every group: null is no limit")
    reference = serializers.ChoiceField(choices=list(REFERENCE_RULES))
    share_shift = serializers.FloatField(
        allow_null=True, help_text="the largest change of a group's share against the training data"
    )
    min_group_rows = serializers.IntegerField()
    min_batch_rows = serializers.IntegerField()
    alpha = serializers.FloatField(help_text="the false-alarm rate over the horizon")
    horizon = serializers.IntegerField(help_text="looks (judged batches) the alpha is spent over")


class _MonitorPolicyVersionSerializer(serializers.Serializer[Any]):
    version = serializers.IntegerField()
    spec = _MonitorSpecSerializer()
    reason = serializers.CharField()
    created_by = serializers.CharField(help_text="for a confirmed loosening: its proposer")
    confirmed_by = serializers.CharField(
        allow_null=True, help_text="the second administrator who confirmed a loosening; null: it loosened nothing"
    )
    proposal = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()
    active = serializers.BooleanField()


class _MonitorPolicyProposalSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    state = serializers.ChoiceField(
        choices=list(PROPOSAL_STATES),
        help_text="stale: made against an older version than the active one; it can only be withdrawn",
    )
    base_version = serializers.IntegerField()
    spec = _MonitorSpecSerializer()
    loosens = serializers.ListField(
        child=serializers.CharField(), help_text="the values it loosens, e.g. limits.fnr.upper, alpha"
    )
    reason = serializers.CharField()
    proposed_by = serializers.CharField()
    proposed_at = serializers.DateTimeField()
    closed_by = serializers.CharField(allow_null=True)
    closed_at = serializers.DateTimeField(allow_null=True)
    version = serializers.IntegerField(allow_null=True, help_text="the version its confirmation made")


class DeploymentListApi(APIView):
    """GET: every deployment (members). POST: a new one (ML engineers, administrators), empty or with a
    first approved model."""

    pagination_class = DefaultPagination

    class InputSerializer(serializers.Serializer[Any]):
        name = serializers.CharField(help_text="e.g. credit-scoring/prod: lowercase segments joined by '/'")
        description = serializers.CharField(required=False, allow_blank=True, default="")
        model = serializers.CharField(
            required=False, allow_blank=True, default="", help_text="an approved model to promote at once"
        )

    @extend_schema(responses=_DeploymentSerializer(many=True))
    def get(self, request: Request) -> Response:
        user = request_user(request)
        rules.check_view(user)
        paginator = DefaultPagination()
        page = paginator.paginate_queryset(selectors.deployment_list(user=user), request, view=self)
        return paginator.get_paginated_response([deployment_as_json(deployment) for deployment in page or []])

    @extend_schema(request=InputSerializer, responses={201: _DeploymentStatusSerializer})
    def post(self, request: Request) -> Response:
        user = request_user(request)
        rules.check_create(user)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        deployment = services.deployment_create(
            user=user, name=data["name"], description=data["description"], model_identifier=data["model"]
        )
        return Response(selectors.deployment_status_of(deployment=deployment).as_json(), status=201)


class DeploymentDetailApi(APIView):
    """What should serve in a deployment now, since when and why, and what served before: what a rollout
    controller polls. Members, API tokens with a role, and gate or monitoring tokens read it."""

    authentication_classes = [SessionAuthentication, AnyTokenAuthentication]
    permission_classes = [AllowAny]  # checked below: a member, or a token rules.reads_status_by_token allows

    @extend_schema(responses={200: _DeploymentStatusSerializer})
    def get(self, request: Request, name: str) -> Response:
        token = request.auth if isinstance(request.auth, ApiToken) else None
        if token is not None and rules.reads_status_by_token(token):
            try:
                deployment = selectors.deployment_find(name=name)
            except Http404 as exc:
                raise exceptions.NotFound(str(exc)) from None
        elif not request.user.is_authenticated:
            raise exceptions.NotAuthenticated("Log in, or send a token: Authorization: Token <token>.")
        else:
            # A person, or an API token acting with its account's roles.
            deployment = _deployment(request_user(request), name)
        return Response(selectors.deployment_status_of(deployment=deployment).as_json())


class DeploymentPromoteApi(APIView):
    """Promote an approved model into the deployment (ML engineers, administrators): it serves from now
    on. Refused (400, field ``model``) with the gate's reason when the model is not approved now."""

    class InputSerializer(serializers.Serializer[Any]):
        model = serializers.CharField(help_text="the model identifier its review request names")
        reason = serializers.CharField(required=False, allow_blank=True, default="", help_text="a note for the history")

    @extend_schema(request=InputSerializer, responses={200: _DeploymentStatusSerializer})
    def post(self, request: Request, name: str) -> Response:
        user = request_user(request)
        deployment = _deployment(user, name)
        rules.check_promote(user)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        deployment = services.deployment_promote(
            deployment=deployment,
            model_identifier=serializer.validated_data["model"],
            by=user,
            reason=serializer.validated_data["reason"],
        )
        return Response(selectors.deployment_status_of(deployment=deployment).as_json())


class MonitorPolicyApi(APIView):
    """GET: the deployment's active monitor policy, its history and its proposals (members). POST: the
    next version (administrators): a change that loosens anything is answered 202 with a proposal that a
    different administrator confirms."""

    class InputSerializer(serializers.Serializer[Any]):
        spec = serializers.DictField(
            help_text=(
                "the values to change, as the active version's spec names them; the rest carry over (inside "
                f"limits, a metric's bounds given replace that metric's; metrics {', '.join(METRICS)}, bounds "
                f"{', '.join(BOUNDS)}; null clears a limit)"
            )
        )
        reason = serializers.CharField()

    class OutputSerializer(serializers.Serializer[Any]):
        deployment = serializers.CharField()
        active = _MonitorPolicyVersionSerializer()
        history = _MonitorPolicyVersionSerializer(many=True)
        proposals = _MonitorPolicyProposalSerializer(many=True)

    @extend_schema(responses={200: OutputSerializer})
    def get(self, request: Request, name: str) -> Response:
        user = request_user(request)
        deployment = _deployment(user, name)
        active = selectors.monitor_policy_active(deployment=deployment)
        return Response(
            {
                "deployment": deployment.name,
                "active": policy_as_json(active, active=active),
                "history": [
                    policy_as_json(policy, active=active)
                    for policy in selectors.monitor_policy_history(deployment=deployment)
                ],
                "proposals": [
                    proposal_as_json(proposal, active=active)
                    for proposal in selectors.monitor_policy_proposals(deployment=deployment)
                ],
            }
        )

    @extend_schema(
        request=InputSerializer,
        responses={201: _MonitorPolicyVersionSerializer, 202: _MonitorPolicyProposalSerializer},
    )
    def post(self, request: Request, name: str) -> Response:
        user = request_user(request)
        deployment = _deployment(user, name)
        rules.check_change_policy(user)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        made = services.monitor_policy_create(
            user=user,
            deployment=deployment,
            changes=serializer.validated_data["spec"],
            reason=serializer.validated_data["reason"],
        )
        active = selectors.monitor_policy_active(deployment=deployment)
        if isinstance(made, MonitorPolicyProposal):
            proposal = selectors.monitor_policy_proposal_get(deployment=deployment, proposal_id=made.pk)
            return Response(proposal_as_json(proposal, active=active), status=202)
        return Response(policy_as_json(made, active=active), status=201)


class MonitorPolicyProposalConfirmApi(APIView):
    """Confirm a pending proposal: an administrator other than its proposer; its version becomes active."""

    @extend_schema(request=None, responses={200: _MonitorPolicyVersionSerializer})
    def post(self, request: Request, name: str, monitor_proposal_id: int) -> Response:
        user = request_user(request)
        proposal = _proposal(user, name, monitor_proposal_id)
        rules.check_change_policy(user)
        policy = services.monitor_policy_proposal_confirm(user=user, proposal=proposal)
        return Response(policy_as_json(policy, active=policy))


class MonitorPolicyProposalWithdrawApi(APIView):
    """Withdraw a pending or stale proposal (any administrator)."""

    @extend_schema(request=None, responses={200: _MonitorPolicyProposalSerializer})
    def post(self, request: Request, name: str, monitor_proposal_id: int) -> Response:
        user = request_user(request)
        proposal = _proposal(user, name, monitor_proposal_id)
        rules.check_change_policy(user)
        services.monitor_policy_proposal_withdraw(user=user, proposal=proposal)
        proposal = selectors.monitor_policy_proposal_get(deployment=proposal.deployment, proposal_id=proposal.pk)
        active = selectors.monitor_policy_active(deployment=proposal.deployment)
        return Response(proposal_as_json(proposal, active=active))


class _WebhookDeliverySummarySerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    event = serializers.ChoiceField(choices=list(EVENTS))
    attempts = serializers.IntegerField(help_text="attempts made so far (at most 8)")
    status = serializers.ChoiceField(
        choices=WebhookDeliveryStatus.choices,
        help_text="pending: queued or waiting for its next attempt; delivered: a 2xx; failed: for good",
    )
    response_code = serializers.IntegerField(
        allow_null=True, help_text="the last attempt's HTTP status; null: no answer (see the log's error)"
    )
    created_at = serializers.DateTimeField()
    last_attempt_at = serializers.DateTimeField(allow_null=True)
    delivered_at = serializers.DateTimeField(allow_null=True)


class _WebhookDeliverySerializer(_WebhookDeliverySummarySerializer):
    body = serializers.CharField(help_text="the exact body posted (canonical JSON, the bytes signed)")
    response_body_head = serializers.CharField(
        allow_blank=True,
        help_text="the first bytes of the last answer's body, as text: the receiver's, untrusted",
    )
    error = serializers.CharField(allow_blank=True, help_text="why the last attempt got no answer")


class _WebhookEndpointSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    url = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    active = serializers.BooleanField(help_text="false: deactivated, posted nothing more")
    created_by = serializers.CharField(source="created_by.username")
    created_at = serializers.DateTimeField()
    deactivated_by = serializers.CharField(source="deactivated_by.username", allow_null=True)
    deactivated_at = serializers.DateTimeField(allow_null=True)
    recent_deliveries = _WebhookDeliverySummarySerializer(
        many=True,
        help_text=f"its latest {selectors.RECENT_DELIVERIES} deliveries, newest first (the log: .../deliveries/)",
    )


class WebhookListApi(APIView):
    """GET: the deployment's webhook endpoints with their latest deliveries, never their secrets. POST:
    register a new one; its signing secret is in this answer only. Administrators only."""

    class InputSerializer(serializers.Serializer[Any]):
        url = serializers.CharField(
            allow_blank=True,
            trim_whitespace=False,
            help_text=f"absolute https:// or http:// with a host, no user or password, at most {MAX_URL} characters",
        )
        description = serializers.CharField(
            required=False, allow_blank=True, default="", help_text=f"at most {MAX_DESCRIPTION} characters"
        )

    class OutputSerializer(_WebhookEndpointSerializer):
        secret = serializers.CharField(
            help_text=(
                "the signing secret (whsec_ + 64 hex digits) of X-Portal-Signature: shown in this answer once, "
                "never again; store it now (to rotate it, register a new endpoint and deactivate this one)"
            )
        )

    @extend_schema(responses={200: _WebhookEndpointSerializer(many=True)})
    def get(self, request: Request, name: str) -> Response:
        user = request_user(request)
        deployment = _deployment(user, name)
        rules.check_manage_webhooks(user)
        endpoints = selectors.webhook_list(user=user, deployment=deployment)
        return Response(_WebhookEndpointSerializer(endpoints, many=True).data)

    @extend_schema(request=InputSerializer, responses={201: OutputSerializer})
    def post(self, request: Request, name: str) -> Response:
        user = request_user(request)
        deployment = _deployment(user, name)
        rules.check_manage_webhooks(user)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        endpoint, secret = services.webhook_register(
            deployment=deployment,
            user=user,
            url=serializer.validated_data["url"],
            description=serializer.validated_data["description"],
        )
        endpoint = selectors.webhook_get(user=user, deployment=deployment, webhook_id=endpoint.pk)
        return Response({**_WebhookEndpointSerializer(endpoint).data, "secret": secret}, status=201)


class WebhookDeactivateApi(APIView):
    """Deactivate a webhook endpoint (administrators): it is posted nothing more; its log stays."""

    @extend_schema(request=None, responses={200: _WebhookEndpointSerializer})
    def post(self, request: Request, name: str, webhook_id: int) -> Response:
        user = request_user(request)
        endpoint = _webhook(user, name, webhook_id)
        services.webhook_deactivate(endpoint=endpoint, user=user)
        endpoint = selectors.webhook_get(user=user, deployment=endpoint.deployment, webhook_id=endpoint.pk)
        return Response(_WebhookEndpointSerializer(endpoint).data)


class WebhookDeliveryListApi(APIView):
    """A webhook endpoint's delivery log, newest first (administrators): each event's body, attempts,
    status and the last answer (``response_body_head`` is the receiver's text: untrusted)."""

    pagination_class = DefaultPagination

    @extend_schema(responses=_WebhookDeliverySerializer(many=True))
    def get(self, request: Request, name: str, webhook_id: int) -> Response:
        user = request_user(request)
        endpoint = _webhook(user, name, webhook_id)
        paginator = DefaultPagination()
        page = paginator.paginate_queryset(selectors.webhook_deliveries(endpoint=endpoint), request, view=self)
        return paginator.get_paginated_response(_WebhookDeliverySerializer(page or [], many=True).data)


def _webhook(user: User, name: str, webhook_id: int) -> WebhookEndpoint:
    """The endpoint the URL names: 404 for an unknown deployment (or an account without a role), 403
    for a member who is not an administrator, 404 for an endpoint the deployment does not have."""
    deployment = _deployment(user, name)
    rules.check_manage_webhooks(user)
    try:
        return selectors.webhook_get(user=user, deployment=deployment, webhook_id=webhook_id)
    except Http404 as exc:
        raise exceptions.NotFound(str(exc)) from None


def _deployment(user: User, name: str) -> Deployment:
    """The deployment the URL names, as ``user`` may see it: 404 for a name no deployment has, and for
    an account without a role (it must not learn which deployments exist)."""
    try:
        return selectors.deployment_get(user=user, name=name)
    except Http404 as exc:
        raise exceptions.NotFound(str(exc)) from None


def _proposal(user: User, name: str, proposal_id: int) -> MonitorPolicyProposal:
    deployment = _deployment(user, name)
    try:
        return selectors.monitor_policy_proposal_get(deployment=deployment, proposal_id=proposal_id)
    except Http404 as exc:
        raise exceptions.NotFound(str(exc)) from None


def _url(name: str) -> str:
    return reverse("api-deployment", kwargs={"name": name})


# --------------------------------------------------------------------------- production batches


def _batch_reader(request: Request, name: str) -> Deployment:
    """The deployment whose batches the caller reads: a monitoring token (its pipeline's), or a member
    who is an ML engineer or an administrator (session or API token); another token's scope is 401."""
    token = request.auth if isinstance(request.auth, ApiToken) else None
    if token is not None and token.scope == TokenScope.MONITORING:
        try:
            return selectors.deployment_find(name=name)
        except Http404 as exc:
            raise exceptions.NotFound(str(exc)) from None
    if token is not None and token.scope != TokenScope.API:
        raise exceptions.AuthenticationFailed(
            f"This token's scope is {token.scope!r}: batches are read with a monitoring token, or by an ML "
            "engineer or an administrator."
        )
    if not request.user.is_authenticated:
        raise exceptions.NotAuthenticated("Log in, or send a token: Authorization: Token <token>.")
    user = request_user(request)
    deployment = _deployment(user, name)
    rules.check_read_batches(user)
    return deployment


def _batch_poster(request: Request, name: str) -> tuple[Deployment, User]:
    token = request.auth if isinstance(request.auth, ApiToken) else None
    if token is None:
        if request.user.is_authenticated:
            raise exceptions.PermissionDenied("Batches are posted by a serving pipeline with a monitoring token.")
        raise exceptions.NotAuthenticated("Send a monitoring token: Authorization: Token <token>.")
    if token.scope != TokenScope.MONITORING:
        raise exceptions.AuthenticationFailed(
            f"This token's scope is {token.scope!r}, not 'monitoring': ask an administrator for a monitoring token."
        )
    try:
        return selectors.deployment_find(name=name), request_user(request)
    except Http404 as exc:
        raise exceptions.NotFound(str(exc)) from None


def batch_as_json(batch: PredictionBatch) -> dict[str, Any]:
    look = selectors.batch_look(batch=batch)
    if look is not None and batch.counted_at is None:
        # Counted and judged between the two reads (one transaction wrote both): the answer shows the
        # batch as its look saw it, never a look beside a batch still without its counts.
        batch.refresh_from_db()
    return {
        "batch_id": batch.batch_id,
        "url": reverse("api-deployment-batch", kwargs={"name": batch.deployment.name, "batch_id": batch.batch_id}),
        "model": batch.model_identifier,
        "format": batch.format,
        "sha256": batch.sha256,
        "size_bytes": batch.size_bytes,
        "received_at": batch.received_at.isoformat(),
        "received_by": batch.received_by.username,
        "state": batch.state,
        "error": batch.error,
        "error_field": batch.error_field or None,
        "rows": batch.rows,
        "attributes": list(batch.parameters.get("attributes", [])),
        "counts": batch.counts,
        "pending_rows": batch.pending_rows if batch.state == BatchState.COUNTED else None,
        "labels": [
            {
                "id": labels.pk,
                "sha256": labels.sha256,
                "state": labels.state,
                "error": labels.error,
                "labelled": labels.labelled,
                "unmatched": labels.unmatched,
                "counts": labels.counts,
                "received_at": labels.received_at.isoformat(),
            }
            for labels in batch.labels.order_by("id")
        ],
        "position": batch.position,
        "look": look_as_json(look) if look is not None else None,
    }


def look_as_json(look: Look) -> dict[str, Any]:
    return {
        "seq": look.seq,
        "model": look.model_identifier,
        "policy_version": look.policy.version,
        "window": look.window,
        "batch": look.batch.batch_id,
        "labels": look.labels_id,
        "batches": list(look.batches),
        "rows": look.rows,
        "status": look.status or None,
        "breached": look.breached,
        "judgements": look.judgements,
        "created_at": look.created_at.isoformat(),
    }


class _LookSerializer(serializers.Serializer[Any]):
    seq = serializers.IntegerField()
    model = serializers.CharField()
    policy_version = serializers.IntegerField()
    window = serializers.IntegerField(
        allow_null=True, help_text="the tumbling window; null: since the model began serving"
    )
    batch = serializers.CharField(help_text="the batch whose counting (or labels) made this look")
    labels = serializers.IntegerField(allow_null=True)
    batches = serializers.ListField(child=serializers.CharField(), help_text="the batches the window summed")
    rows = serializers.IntegerField()
    status = serializers.CharField(
        allow_null=True, help_text="the worst finding: within, watching, too_few, breach, unseen"
    )
    breached = serializers.BooleanField()
    judgements = serializers.DictField(help_text="per sensitive attribute, the statistics' judgement of the look")
    created_at = serializers.DateTimeField()


class _LabelsSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    sha256 = serializers.CharField()
    state = serializers.ChoiceField(choices=BatchState.choices)
    error = serializers.CharField(allow_blank=True)
    labelled = serializers.IntegerField(allow_null=True)
    unmatched = serializers.IntegerField(allow_null=True)
    counts = serializers.DictField(allow_null=True, help_text="the delta: rows moved from unlabelled into tp/fn/fp/tn")
    received_at = serializers.DateTimeField()


class _BatchSerializer(serializers.Serializer[Any]):
    batch_id = serializers.CharField()
    url = serializers.CharField()
    model = serializers.CharField()
    format = serializers.ChoiceField(choices=BatchFormat.choices)
    sha256 = serializers.CharField()
    size_bytes = serializers.IntegerField()
    received_at = serializers.DateTimeField()
    received_by = serializers.CharField()
    state = serializers.ChoiceField(choices=BatchState.choices)
    error = serializers.CharField(allow_blank=True)
    error_field = serializers.CharField(allow_null=True)
    rows = serializers.IntegerField(allow_null=True)
    attributes = serializers.ListField(child=serializers.CharField())
    counts = serializers.DictField(
        allow_null=True,
        help_text="per attribute: {groups: {group: {tp, fn, fp, tn, unlabelled, unlabelled_selected}}, unknown}",
    )
    pending_rows = serializers.IntegerField(allow_null=True, help_text="unlabelled rows still waiting for a label")
    labels = _LabelsSerializer(many=True)
    position = serializers.IntegerField(allow_null=True)
    look = _LookSerializer(allow_null=True)


@accepts_uploads(
    rules.can_post_batches, who="a serving pipeline (monitoring token)", limit_setting="MONITORING_BATCH_MAX_BYTES"
)
class BatchListApi(APIView):
    """GET: the deployment's batches, newest first. POST: a batch of production predictions (monitoring
    token): a CSV or Parquet ``file``, or pre-aggregated ``counts`` as JSON; 202 while a worker counts it."""

    authentication_classes = [SessionAuthentication, AnyTokenAuthentication]
    permission_classes = [AllowAny]
    parser_classes = [MultiPartParser, FormParser, JSONParser]
    pagination_class = DefaultPagination

    class InputSerializer(serializers.Serializer[Any]):
        batch_id = serializers.CharField(help_text="the client's id: the same id with the same content is answered 200")
        file = serializers.FileField(required=False, help_text="CSV or Parquet (multipart)")
        counts = serializers.JSONField(
            required=False, help_text="instead of a file: per attribute, per group, the cells"
        )
        model = serializers.CharField(
            required=False, allow_blank=True, default="", help_text="default: the serving model"
        )
        prediction = serializers.CharField(required=False, allow_blank=True, default="")
        score = serializers.CharField(required=False, allow_blank=True, default="")
        threshold = serializers.FloatField(required=False, allow_null=True, default=None)
        label = serializers.CharField(
            required=False, allow_blank=True, default="", help_text="optional; empty values: unlabelled"
        )  # type: ignore[assignment]
        positive = serializers.CharField(required=False, allow_blank=True, default="1")
        row_key = serializers.CharField(
            required=False, allow_blank=True, default="", help_text="keeps unlabelled rows for late labels"
        )

    @extend_schema(responses=_BatchSerializer(many=True))
    def get(self, request: Request, name: str) -> Response:
        deployment = _batch_reader(request, name)
        paginator = DefaultPagination()
        page = paginator.paginate_queryset(selectors.batch_list(deployment=deployment), request, view=self)
        return paginator.get_paginated_response([batch_as_json(batch) for batch in page or []])

    @extend_schema(
        request={"multipart/form-data": InputSerializer, "application/json": InputSerializer},
        responses={200: _BatchSerializer, 202: _BatchSerializer},
    )
    def post(self, request: Request, name: str) -> Response:
        deployment, user = _batch_poster(request, name)
        data = request.data  # parsed here: the upload handlers note a file dropped for its size
        refuse_rejected_upload(request, setting="MONITORING_BATCH_MAX_SIZE")
        serializer = self.InputSerializer(data=data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if ("file" in data) == ("counts" in data):
            raise exceptions.ValidationError(
                {"file": ["Send a file (CSV or Parquet), or counts as JSON: one of them."]}
            )
        try:
            received = self._receive(deployment, user, data)
        except services.BatchConflict as exc:
            return Response({"detail": str(exc), "field": exc.field}, status=409)
        body = batch_as_json(received.batch)
        response = Response(body, status=202 if received.created else 200)
        response["Location"] = body["url"]
        return response

    def _receive(self, deployment: Deployment, user: User, data: dict[str, Any]) -> services.Received:
        if "file" in data:
            uploaded = data["file"]
            path = Path(uploaded.temporary_file_path())
            return services.batch_receive_file(
                deployment=deployment,
                user=user,
                batch_id=data["batch_id"],
                source=path,
                original_name=uploaded.name or "batch.csv",
                sha256=received_sha256(uploaded) or file_sha256(path),
                model=data["model"],
                prediction=data["prediction"],
                score=data["score"],
                threshold=data["threshold"],
                label=data["label"],
                positive=data["positive"],
                row_key=data["row_key"],
            )
        return services.batch_receive_counts(
            deployment=deployment, user=user, batch_id=data["batch_id"], counts=data["counts"], model=data["model"]
        )


class BatchDetailApi(APIView):
    """A batch: its state, counts, labels and latest look."""

    authentication_classes = [SessionAuthentication, AnyTokenAuthentication]
    permission_classes = [AllowAny]

    @extend_schema(responses={200: _BatchSerializer})
    def get(self, request: Request, name: str, batch_id: str) -> Response:
        deployment = _batch_reader(request, name)
        return Response(batch_as_json(_batch(deployment, batch_id)))


@accepts_uploads(
    rules.can_post_batches, who="a serving pipeline (monitoring token)", limit_setting="MONITORING_BATCH_MAX_BYTES"
)
class BatchLabelsApi(APIView):
    """Labels for an earlier batch's rows by row key (monitoring token): a CSV or Parquet ``file`` with
    the row key and label columns; 202 while a worker applies them and judges the window again."""

    authentication_classes = [SessionAuthentication, AnyTokenAuthentication]
    permission_classes = [AllowAny]
    parser_classes = [MultiPartParser, FormParser]

    class InputSerializer(serializers.Serializer[Any]):
        file = serializers.FileField()
        row_key = serializers.CharField()
        label = serializers.CharField()  # type: ignore[assignment]
        positive = serializers.CharField(required=False, allow_blank=True, default="1")

    @extend_schema(
        request={"multipart/form-data": InputSerializer}, responses={200: _LabelsSerializer, 202: _LabelsSerializer}
    )
    def post(self, request: Request, name: str, batch_id: str) -> Response:
        deployment, user = _batch_poster(request, name)
        batch = _batch(deployment, batch_id)
        body_data = request.data
        refuse_rejected_upload(request, setting="MONITORING_BATCH_MAX_SIZE")
        serializer = self.InputSerializer(data=body_data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        path = Path(data["file"].temporary_file_path())
        labels, created = services.labels_receive(
            batch=batch,
            user=user,
            source=path,
            original_name=data["file"].name or "labels.csv",
            sha256=received_sha256(data["file"]) or file_sha256(path),
            row_key=data["row_key"],
            label=data["label"],
            positive=data["positive"],
        )
        body = next(entry for entry in batch_as_json(batch)["labels"] if entry["id"] == labels.pk)
        return Response(body, status=202 if created else 200)


class LookListApi(APIView):
    """The deployment's latest look (``latest``) and the looks before it, newest first (paginated)."""

    authentication_classes = [SessionAuthentication, AnyTokenAuthentication]
    permission_classes = [AllowAny]
    pagination_class = DefaultPagination

    @extend_schema(responses={200: _LookSerializer(many=True)})
    def get(self, request: Request, name: str) -> Response:
        deployment = _batch_reader(request, name)
        paginator = DefaultPagination()
        page = paginator.paginate_queryset(selectors.look_list(deployment=deployment), request, view=self)
        return paginator.get_paginated_response([look_as_json(look) for look in page or []])


def _batch(deployment: Deployment, batch_id: str) -> PredictionBatch:
    try:
        return selectors.batch_get(deployment=deployment, batch_id=batch_id)
    except Http404 as exc:
        raise exceptions.NotFound(str(exc)) from None
