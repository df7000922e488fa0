"""How many people a report names to sign, beside its context (the reports API filters by signing state):
counted from the stored context of every report made before the column."""

import json
from typing import Any

from django.db import migrations, models


def count_signatories(apps: Any, schema_editor: Any) -> None:
    """Reports stored before the column: their context's signatories, counted once."""
    reports = apps.get_model("reports", "Report").objects.using(schema_editor.connection.alias)
    for report in reports.only("pk", "context_json").iterator():
        signatories = json.loads(report.context_json).get("signatories") or []
        reports.filter(pk=report.pk).update(signatory_count=len(signatories))


class Migration(migrations.Migration):
    dependencies = [
        ("reports", "0002_report_review_request"),
    ]

    operations = [
        migrations.AddField(
            model_name="report",
            name="signatory_count",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(count_signatories, migrations.RunPython.noop),
    ]
