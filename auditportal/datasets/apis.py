from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from auditportal.accounts.models import User
from auditportal.datasets import selectors
from auditportal.lib.rest import DefaultPagination


class DatasetListApi(APIView):
    """The datasets this account may see, with their number of versions."""

    pagination_class = DefaultPagination

    class OutputSerializer(serializers.Serializer[Any]):
        id = serializers.IntegerField()
        name = serializers.CharField()
        version_count = serializers.IntegerField()
        latest_number = serializers.IntegerField(allow_null=True)
        created_at = serializers.DateTimeField()

    @extend_schema(responses=OutputSerializer(many=True))
    def get(self, request: Request) -> Response:
        user = request.user
        assert isinstance(user, User)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(selectors.dataset_list(user=user), request, view=self)
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)


class _FeatureSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    kind = serializers.CharField(help_text="numeric or categorical, as registration profiled the column")


class _IntegritySerializer(serializers.Serializer[Any]):
    ok = serializers.BooleanField()
    checked_at = serializers.DateTimeField()
    purpose = serializers.CharField()
    observed_sha256 = serializers.CharField(allow_null=True)
    file_missing = serializers.BooleanField()


class _RetiredSerializer(serializers.Serializer[Any]):
    at = serializers.DateTimeField()
    by = serializers.CharField()
    reason = serializers.CharField()


class _AttributeSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    groups = serializers.ListField(child=serializers.CharField(allow_blank=True))
    unknown_count = serializers.IntegerField()


class _GroupRowSerializer(serializers.Serializer[Any]):
    group = serializers.CharField(allow_null=True, allow_blank=True, help_text="the group's key; null: unknown")
    values = serializers.ListField(child=serializers.CharField(allow_blank=True), allow_null=True)
    rows = serializers.IntegerField()
    positives = serializers.IntegerField()
    negatives = serializers.IntegerField()
    share = serializers.FloatField()


class _GroupTableSerializer(serializers.Serializer[Any]):
    attribute = serializers.CharField()
    columns = serializers.ListField(child=serializers.CharField())
    is_intersection = serializers.BooleanField()
    groups = _GroupRowSerializer(many=True)


class DatasetVersionDetailApi(APIView):
    """One registered version: its file, declaration, per-group counts, integrity and retirement."""

    class VersionSerializer(serializers.Serializer[Any]):
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
        features = _FeatureSerializer(many=True)
        created_at = serializers.DateTimeField()

    class OutputSerializer(VersionSerializer):
        # VersionSerializer's fields and what get() adds to them.
        integrity = _IntegritySerializer(allow_null=True, help_text="the latest integrity check; null: none yet")
        retired = _RetiredSerializer(allow_null=True)
        warnings = serializers.ListField(child=serializers.CharField())
        attributes = _AttributeSerializer(many=True)
        groups = _GroupTableSerializer(many=True)

    @extend_schema(responses=OutputSerializer)
    def get(self, request: Request, version_id: int) -> Response:
        user = request.user
        assert isinstance(user, User)
        version = selectors.dataset_version_get(user=user, version_id=version_id)
        data = dict(self.VersionSerializer(version).data)
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
