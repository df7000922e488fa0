from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from auditportal.accounts.permissions import request_user
from auditportal.attributions import rules, selectors, services
from auditportal.attributions.models import AttributionState, TrialAttribution
from auditportal.experiments.selectors import trial_get
from auditportal.lib.rest import open_component


@open_component
class _AttributionDocumentSerializer(serializers.Serializer[Any]):
    """A trial's attributions summary (docs/attributions.md), as stored: canonical JSON, hashed."""

    schema = serializers.IntegerField()
    method = serializers.CharField(help_text="the attribution method, its library and settings")
    baseline = serializers.DictField(help_text="kind: what the baseline row is; score: the model's output there")
    completeness = serializers.DictField(
        help_text="max_error: the largest |row sum - (score - baseline score)|; tolerance; holds"
    )
    sample = serializers.DictField(help_text="size: the validation rows explained; seed")
    features = serializers.ListField(child=serializers.CharField())
    attributes = serializers.DictField(
        child=serializers.DictField(),
        help_text="per attribute: its reference group; per group the sample, population and positives, mean "
        "|attribution| per feature, the score gap and the recall gap against the reference split into "
        "per-feature contributions with bootstrap intervals; per feature its proxy AUC and mutual information",
    )
    inputs = serializers.DictField(help_text="the trial, its checkpoint's SHA-256, the dataset version, sample, seed")


class _AttributionSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    trial = serializers.IntegerField(source="trial_id")
    state = serializers.ChoiceField(
        choices=AttributionState.values, help_text="a worker computes it: pending until then, then done or failed"
    )
    error = serializers.CharField(allow_blank=True, help_text="why it failed")
    checkpoint_name = serializers.CharField(help_text="the checkpoint's folder (its path is not shown)")
    checkpoint_sha256 = serializers.CharField(help_text="the SHA-256 of the checkpoint's state_dict.pth")
    dataset_version = serializers.IntegerField(source="dataset_version_id")
    dataset_sha256 = serializers.CharField()
    sample_size = serializers.IntegerField(help_text="validation rows asked for (at most; stratified by group)")
    seed = serializers.IntegerField()
    method = serializers.CharField(allow_blank=True)
    sha256 = serializers.CharField(allow_blank=True, help_text="the SHA-256 of the document's canonical JSON")
    document = serializers.SerializerMethodField(help_text="null until done")
    created_by = serializers.CharField(source="created_by.username")
    created_at = serializers.DateTimeField()
    completed_at = serializers.DateTimeField(allow_null=True)

    @extend_schema_field(_AttributionDocumentSerializer(allow_null=True))
    def get_document(self, attribution: TrialAttribution) -> dict[str, Any] | None:
        return attribution.document  # as stored, its numbers exactly


def _body(attribution: TrialAttribution) -> dict[str, Any]:
    return dict(_AttributionSerializer(attribution).data)


class TrialAttributionCreateApi(APIView):
    """POST: ask why the trial's model has its gaps (ML engineers and reviewers): per-group feature
    attributions and proxy features of its checkpoint on a stratified sample of its validation rows. A
    worker computes them: the answer is the pending attribution (202), or the one already stored for the
    same checkpoint, dataset version, sample size and seed (200); GET its URL to see it done or failed."""

    class InputSerializer(serializers.Serializer[Any]):
        sample_size = serializers.IntegerField(
            default=services.DEFAULT_SAMPLE_SIZE,
            help_text=f"validation rows to explain, {services.MIN_SAMPLE_SIZE}-{services.MAX_SAMPLE_SIZE}; "
            "every group is represented",
        )
        seed = serializers.IntegerField(default=0, help_text="the sample's and the bootstrap's seed")

    @extend_schema(request=InputSerializer, responses={200: _AttributionSerializer, 202: _AttributionSerializer})
    def post(self, request: Request, trial_id: int) -> Response:
        user = request_user(request)
        trial = trial_get(user=user, trial_id=trial_id)
        rules.check_request(user)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        attribution, created = services.attribution_request(
            user=user,
            trial=trial,
            sample_size=serializer.validated_data["sample_size"],
            seed=serializer.validated_data["seed"],
        )
        return Response(_body(attribution), status=202 if created else 200)


class TrialAttributionDetailApi(APIView):
    @extend_schema(responses=_AttributionSerializer)
    def get(self, request: Request, trial_id: int, attribution_id: int) -> Response:
        user = request_user(request)
        trial = trial_get(user=user, trial_id=trial_id)
        return Response(_body(selectors.attribution_get(user=user, trial=trial, attribution_id=attribution_id)))
