from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from auditportal.accounts.models import User
from auditportal.api.pagination import DefaultPagination
from auditportal.datasets import selectors


class DatasetListApi(APIView):
    class OutputSerializer(serializers.Serializer[Any]):
        id = serializers.IntegerField()
        name = serializers.CharField()
        version_count = serializers.IntegerField()
        latest_number = serializers.IntegerField(allow_null=True)
        created_at = serializers.DateTimeField()

    def get(self, request: Request) -> Response:
        user = request.user
        assert isinstance(user, User)
        paginator = DefaultPagination()
        page = paginator.paginate_queryset(selectors.dataset_list(user=user), request, view=self)
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)


class DatasetVersionDetailApi(APIView):
    class OutputSerializer(serializers.Serializer[Any]):
        id = serializers.IntegerField()
        dataset = serializers.CharField(source="dataset.name")
        number = serializers.IntegerField()
        original_name = serializers.CharField()
        file_format = serializers.CharField()
        sha256 = serializers.CharField()
        size_bytes = serializers.IntegerField()
        num_rows = serializers.IntegerField()
        positives = serializers.IntegerField()
        negatives = serializers.IntegerField()
        label_column = serializers.CharField()
        positive_value = serializers.CharField()
        unknown_tokens = serializers.ListField(child=serializers.CharField(allow_blank=True))
        features = serializers.ListField(child=serializers.DictField())
        created_at = serializers.DateTimeField()

    def get(self, request: Request, version_id: int) -> Response:
        user = request.user
        assert isinstance(user, User)
        version = selectors.dataset_version_get(user=user, version_id=version_id)
        data = dict(self.OutputSerializer(version).data)
        latest = selectors.dataset_version_integrity_latest(version=version)
        data["integrity"] = (
            None
            if latest is None
            else {
                "ok": latest.ok,
                "checked_at": serializers.DateTimeField().to_representation(latest.checked_at),
                "purpose": latest.purpose,
                "observed_sha256": latest.observed_sha256 or None,
                "file_missing": latest.file_missing,
            }
        )
        data["retired"] = (
            None
            if version.retired_at is None or version.retired_by is None
            else {
                "at": serializers.DateTimeField().to_representation(version.retired_at),
                "by": version.retired_by.username,
                "reason": version.retired_reason,
            }
        )
        data["warnings"] = version.warnings
        data["attributes"] = [
            {"name": a.name, "groups": a.groups, "unknown_count": a.unknown_count}
            for a in version.attributes.order_by("position")
        ]
        data["groups"] = [
            {
                "attribute": table.attribute,
                "columns": list(table.columns),
                "is_intersection": table.is_intersection,
                "groups": [
                    {
                        "group": None if row.is_unknown else row.group,
                        "values": None if row.is_unknown else list(row.values),
                        "rows": row.rows,
                        "positives": row.positives,
                        "negatives": row.negatives,
                        "share": row.share,
                    }
                    for row in table.rows
                ],
            }
            for table in selectors.dataset_version_group_tables(version=version)
        ]
        return Response(data)
