"""Group summaries keep each group's values as a list and are keyed without ambiguity.

Before, the intersection's groups were their values joined by a bare "&", so ("a", "b&c") and
("a&b", "c") shared a key; a file with both could not be registered (the unique constraint failed).
Every stored row is still decodable: registration lists every combination of the first two
attributes' groups, so a version with two combinations that read the same was never stored, and each
old intersection group matches exactly one pair of the version's declared groups. This rewrites
``attribute`` and ``group`` as the keys of auditportal/fairness/files/intersections.py (names with "%" or
"&" percent-encoded; unchanged for every name without them) and fills ``values``.

The encoding is repeated here rather than imported: a migration must keep working when the code it
was written against changes.
"""

from __future__ import annotations

import re
from typing import Any

from django.db import migrations, models


def _key(parts: list[str]) -> str:
    return "&".join(part.replace("%", "%25").replace("&", "%26") for part in parts)


def _split(key: str) -> list[str]:
    return [re.sub("%(25|26)", lambda m: {"25": "%", "26": "&"}[m.group(1)], part) for part in key.split("&")]


def keys_from_joined_names(apps: Any, schema_editor: Any) -> None:
    GroupSummary = apps.get_model("datasets", "GroupSummary")
    SensitiveAttribute = apps.get_model("datasets", "SensitiveAttribute")
    for version_id in GroupSummary.objects.values_list("version_id", flat=True).distinct().order_by():
        declared = list(SensitiveAttribute.objects.filter(version_id=version_id).order_by("position")[:2])
        names = [attribute.name for attribute in declared]
        pairs = {}
        if len(declared) == 2:
            pairs = {f"{a}&{b}": [a, b] for a in declared[0].groups for b in declared[1].groups}
        rows = list(GroupSummary.objects.filter(version_id=version_id))
        for row in rows:
            if row.is_intersection:
                row.attribute = _key(names)
                row.values = [] if row.is_unknown else pairs.get(row.group) or row.group.split("&", 1)
                row.group = "" if row.is_unknown else _key(row.values)
            else:
                row.values = [] if row.is_unknown else [row.group]
                row.attribute = _key([row.attribute])
        GroupSummary.objects.bulk_update(rows, ["attribute", "group", "values"])


def joined_names_from_keys(apps: Any, schema_editor: Any) -> None:
    # Fails on the unique constraint for a version that only the new keys could register.
    GroupSummary = apps.get_model("datasets", "GroupSummary")
    rows = list(GroupSummary.objects.all())
    for row in rows:
        row.attribute = "&".join(_split(row.attribute))
        if row.is_intersection and not row.is_unknown:
            row.group = "&".join(row.values)
    GroupSummary.objects.bulk_update(rows, ["attribute", "group"])


class Migration(migrations.Migration):
    dependencies = [
        ("datasets", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="groupsummary",
            name="values",
            field=models.JSONField(default=list),
        ),
        migrations.RunPython(keys_from_joined_names, joined_names_from_keys),
    ]
