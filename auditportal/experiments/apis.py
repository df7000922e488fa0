from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from auditportal.accounts.permissions import request_user
from auditportal.datasets.selectors import dataset_version_get
from auditportal.experiments import configs, rules, selectors, services
from auditportal.experiments.models import Backend, ExperimentStatus, StopReason, Template, TrialState
from auditportal.fairness.statistics.stats import Verdict
from auditportal.lib.rest import DefaultPagination
from trainer.hparams import HPARAMS, MAX_HIDDEN_LAYERS, MAX_LAYER_WIDTH, RANGE_TYPES, Hparam


def _hparam_value_schema(hparam: Hparam) -> dict[str, Any]:
    number: dict[str, Any] = {"type": "integer" if hparam.kind == "int" else "number"}
    if hparam.low is not None:
        number |= {"minimum": hparam.low, "exclusiveMinimum": hparam.low_exclusive}
    if hparam.high is not None:
        number |= {"maximum": hparam.high, "exclusiveMaximum": hparam.high_exclusive}
    widths = {"type": "integer", "minimum": 1, "maximum": MAX_LAYER_WIDTH}
    return {
        "int": number,
        "float": number,
        "bool": {"type": "boolean"},
        "choice": {"type": "string", "enum": list(hparam.choices)},
        "widths": {
            "oneOf": [
                {"type": "array", "items": widths, "minItems": 1, "maxItems": MAX_HIDDEN_LAYERS},
                {"type": "string", "example": "64,32"},
            ]
        },
    }[hparam.kind]


def _hparams_schema() -> dict[str, Any]:
    """trainer/hparams.py's names and ranges: each a value, or a Determined range over such values."""
    properties = {}
    for name, hparam in HPARAMS.items():
        value = _hparam_value_schema(hparam)
        space = {
            "type": "object",
            "description": "a Determined range: const (val), categorical (vals), int, double or log "
            "(minval, maxval; log also base, default 10: the values are base**minval to base**maxval)",
            "properties": {
                "type": {"type": "string", "enum": list(RANGE_TYPES)},
                "val": value,
                "vals": {"type": "array", "items": value, "minItems": 1},
                "minval": {"type": "number"},
                "maxval": {"type": "number"},
                "base": {"type": "number", "minimum": 1, "exclusiveMinimum": True},
            },
            "required": ["type"],
        }
        properties[name] = {"description": f"{hparam.meaning} (default {hparam.default!r})", "oneOf": [value, space]}
    return {
        "type": "object",
        "description": "Overrides of the template's hyperparameters (trainer/hparams.py).",
        "properties": properties,
        "additionalProperties": False,
    }


@extend_schema_field(_hparams_schema())
class _HparamsField(serializers.DictField):
    pass


class _VerdictSerializer(serializers.Serializer[Any]):
    """A trial's live verdict on one attribute (the worst comparison), as of ``step``."""

    attribute = serializers.CharField()
    verdict = serializers.ChoiceField(choices=Verdict.choices(), allow_null=True)
    step = serializers.IntegerField()
    group = serializers.CharField(allow_null=True)
    reference = serializers.CharField(allow_null=True)
    difference = serializers.FloatField(allow_null=True)
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    positives_needed = serializers.IntegerField(allow_null=True)
    tolerance = serializers.FloatField()
    alpha = serializers.FloatField()
    policy_version = serializers.IntegerField(allow_null=True)


class _TrialMetricsSerializer(serializers.Serializer[Any]):
    """The trial's latest validation metrics."""

    eod = serializers.FloatField(allow_null=True)
    eod_beyond_noise = serializers.FloatField(
        allow_null=True, help_text="The largest recall gap less its sampling noise; fair_objective searches on it."
    )
    fair_objective = serializers.FloatField(allow_null=True)
    accuracy = serializers.FloatField(allow_null=True)
    step = serializers.IntegerField(allow_null=True)


class _TrialSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    number = serializers.IntegerField()
    det_trial_id = serializers.IntegerField(allow_null=True)
    state = serializers.ChoiceField(choices=TrialState.choices)
    state_label = serializers.CharField()
    steps = serializers.IntegerField()
    steps_planned = serializers.IntegerField()
    progress_percent = serializers.IntegerField()
    hparams = serializers.DictField()
    hparams_text = serializers.ListField(
        child=serializers.ListField(child=serializers.CharField(), min_length=2, max_length=2),
        help_text="[name, value] pairs as the pages show them",
    )
    metrics = _TrialMetricsSerializer()
    verdicts = _VerdictSerializer(many=True)
    checkpoint = serializers.CharField(
        allow_blank=True, allow_null=True, help_text="null: shown to ML engineers and administrators only"
    )
    error = serializers.CharField(allow_blank=True)
    log_tail = serializers.CharField(
        allow_blank=True,
        allow_null=True,
        help_text="the errored trial's last log lines; null: shown to ML engineers and administrators only",
    )
    ended_at = serializers.DateTimeField(allow_null=True, help_text="when the trial's last process ended")
    stop_reason = serializers.ChoiceField(choices=StopReason.choices, allow_null=True)
    stop_requested_at = serializers.DateTimeField(allow_null=True)
    stopped_at_rung = serializers.IntegerField(
        allow_null=True,
        help_text=(
            "the ASHA rung (from 1) it was stopped at; null when it was not stopped before the end of its training"
        ),
    )
    note = serializers.CharField(allow_blank=True, help_text="how the portal stopped the trial, as the page says")


class _ExperimentProgressSerializer(serializers.Serializer[Any]):
    """An experiment, its trials and their latest metrics and verdicts (selectors.experiment_as_json)."""

    experiment = serializers.IntegerField(help_text="the experiment's id")
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=ExperimentStatus.choices)
    status_label = serializers.CharField()
    error = serializers.CharField(allow_blank=True)
    template = serializers.ChoiceField(choices=Template.choices)
    slots_per_trial = serializers.IntegerField()
    max_concurrent_trials = serializers.IntegerField(
        help_text="Determined's searcher.max_concurrent_trials (0: the searcher's default)"
    )
    stopped_early = serializers.IntegerField(
        help_text="trials an ASHA search stopped at a rung before they had trained their whole length"
    )
    backend = serializers.ChoiceField(choices=Backend.choices)
    det_experiment_id = serializers.IntegerField(allow_null=True)
    dataset_version = serializers.IntegerField()
    active = serializers.BooleanField()
    cancel_requested_at = serializers.DateTimeField(allow_null=True)
    ended_at = serializers.DateTimeField(allow_null=True)
    cancel_note = serializers.CharField(allow_blank=True)
    trials = _TrialSerializer(many=True)


class ExperimentListApi(APIView):
    """GET: the experiments this account may see. POST: launch one (ML engineers)."""

    pagination_class = DefaultPagination

    class InputSerializer(serializers.Serializer[Any]):
        dataset_version = serializers.IntegerField()
        template = serializers.ChoiceField(choices=Template.choices)
        hparams = _HparamsField(required=False, default=dict)
        max_trials = serializers.IntegerField(required=False, allow_null=True, default=None)
        batches = serializers.IntegerField(required=False, default=200)
        slots_per_trial = serializers.IntegerField(
            required=False,
            default=1,
            min_value=configs.SLOTS_PER_TRIAL_MIN,
            max_value=configs.SLOTS_PER_TRIAL_MAX,
        )
        max_concurrent_trials = serializers.IntegerField(
            required=False,
            allow_null=True,
            default=None,
            min_value=0,
            help_text=(
                "Determined's searcher.max_concurrent_trials: trials of the search training at once (0: the "
                "searcher's default; null: on the embedded default EXPERIMENT_LOCAL_CONCURRENCY divided by "
                "slots_per_trial, on a cluster 0)"
            ),
        )

    class OutputSerializer(serializers.Serializer[Any]):
        id = serializers.IntegerField()
        name = serializers.CharField()
        dataset_version = serializers.IntegerField(source="dataset_version_id")
        template = serializers.CharField()
        slots_per_trial = serializers.IntegerField()
        backend = serializers.CharField()
        status = serializers.ChoiceField(choices=ExperimentStatus.choices)
        error = serializers.CharField(allow_blank=True)
        det_experiment_id = serializers.IntegerField(allow_null=True)
        launched_by = serializers.CharField(source="launched_by.username")
        created_at = serializers.DateTimeField()

    @extend_schema(responses=OutputSerializer(many=True))
    def get(self, request: Request) -> Response:
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(selectors.experiment_list(user=request_user(request)), request, view=self)
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)

    @extend_schema(request=InputSerializer, responses={201: _ExperimentProgressSerializer})
    def post(self, request: Request) -> Response:
        user = request_user(request)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        version = dataset_version_get(user=user, version_id=data["dataset_version"])
        experiment = services.experiment_create(
            user=user,
            dataset_version=version,
            template=data["template"],
            hparams=data["hparams"],
            max_trials=data["max_trials"],
            batches=data["batches"],
            slots_per_trial=data["slots_per_trial"],
            max_concurrent_trials=data["max_concurrent_trials"],
        )
        return Response(selectors.experiment_as_json(experiment, user=user), status=201)


class ExperimentDetailApi(APIView):
    class OutputSerializer(_ExperimentProgressSerializer):
        config_yaml = serializers.CharField(
            allow_null=True, help_text="null: shown to ML engineers and administrators only"
        )
        hparam_space = serializers.DictField()

    @extend_schema(responses=OutputSerializer)
    def get(self, request: Request, experiment_id: int) -> Response:
        user = request_user(request)
        experiment = selectors.experiment_get(user=user, experiment_id=experiment_id)
        data = selectors.experiment_as_json(experiment, user=user)
        data["config_yaml"] = experiment.config_yaml if rules.can_see_run_internals(user) else None
        data["hparam_space"] = experiment.hparam_space
        return Response(data)


class ExperimentCancelApi(APIView):
    @extend_schema(request=None, responses=_ExperimentProgressSerializer)
    def post(self, request: Request, experiment_id: int) -> Response:
        user = request_user(request)
        experiment = selectors.experiment_get(user=user, experiment_id=experiment_id)
        experiment = services.experiment_cancel(user=user, experiment=experiment)
        return Response(selectors.experiment_as_json(experiment, user=user))
