from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from auditportal.accounts.permissions import request_user
from auditportal.api.pagination import DefaultPagination
from auditportal.datasets.selectors import dataset_version_get
from auditportal.experiments import configs, selectors, services
from auditportal.experiments.models import Template


class ExperimentListApi(APIView):
    class InputSerializer(serializers.Serializer[Any]):
        dataset_version = serializers.IntegerField()
        template = serializers.ChoiceField(choices=Template.choices)
        hparams = serializers.DictField(required=False, default=dict)
        max_trials = serializers.IntegerField(required=False, allow_null=True, default=None)
        batches = serializers.IntegerField(required=False, default=200)
        slots_per_trial = serializers.IntegerField(
            required=False,
            default=1,
            min_value=configs.SLOTS_PER_TRIAL_MIN,
            max_value=configs.SLOTS_PER_TRIAL_MAX,
        )

    class OutputSerializer(serializers.Serializer[Any]):
        id = serializers.IntegerField()
        name = serializers.CharField()
        dataset_version = serializers.IntegerField(source="dataset_version_id")
        template = serializers.CharField()
        slots_per_trial = serializers.IntegerField()
        backend = serializers.CharField()
        status = serializers.CharField()
        error = serializers.CharField()
        det_experiment_id = serializers.IntegerField(allow_null=True)
        launched_by = serializers.CharField(source="launched_by.username")
        created_at = serializers.DateTimeField()

    def get(self, request: Request) -> Response:
        paginator = DefaultPagination()
        page = paginator.paginate_queryset(selectors.experiment_list(user=request_user(request)), request, view=self)
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)

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
        )
        return Response(selectors.experiment_as_json(experiment), status=201)


class ExperimentDetailApi(APIView):
    def get(self, request: Request, experiment_id: int) -> Response:
        experiment = selectors.experiment_get(user=request_user(request), experiment_id=experiment_id)
        data = selectors.experiment_as_json(experiment)
        data["config_yaml"] = experiment.config_yaml
        data["hparam_space"] = experiment.hparam_space
        return Response(data)


class ExperimentCancelApi(APIView):
    def post(self, request: Request, experiment_id: int) -> Response:
        user = request_user(request)
        experiment = selectors.experiment_get(user=user, experiment_id=experiment_id)
        experiment = services.experiment_cancel(user=user, experiment=experiment)
        return Response(selectors.experiment_as_json(experiment))
