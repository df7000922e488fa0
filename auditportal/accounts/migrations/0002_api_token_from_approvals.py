"""API tokens move from the approvals app to accounts (they authenticate every machine call, not only the
gate's). Only Django's idea of the model moves: the table keeps its name (``approvals_apitoken``, set
as the model's db_table), its rows, indexes and constraint, so every token issued before still opens.
approvals/0003 drops the model from the approvals app's state. The content type moves with it, so the
admin's permissions and history on tokens keep pointing at them.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def _content_type_to(app_label: str, from_label: str):
    def move(apps, schema_editor):
        ContentType = apps.get_model("contenttypes", "ContentType")
        types = ContentType.objects.using(schema_editor.connection.alias)
        if not types.filter(app_label=app_label, model="apitoken").exists():
            types.filter(app_label=from_label, model="apitoken").update(app_label=app_label)

    return move


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_initial"),
        ("approvals", "0002_api_token_scope"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ApiToken",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID"),
                        ),
                        ("digest", models.CharField(max_length=128, unique=True)),
                        ("token_key", models.CharField(db_index=True, max_length=25)),
                        ("created", models.DateTimeField(auto_now_add=True)),
                        ("expiry", models.DateTimeField()),
                        ("name", models.CharField(max_length=100)),
                        (
                            "scope",
                            models.CharField(
                                choices=[("gate", "Read the approval gate"), ("api", "Use the API as its account")],
                                default="gate",
                                max_length=16,
                            ),
                        ),
                        ("revoked_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "created_by",
                            models.ForeignKey(
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "revoked_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "user",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="api_tokens",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "approvals_apitoken",
                        "ordering": ["-created", "-id"],
                        "constraints": [
                            models.CheckConstraint(
                                condition=models.Q(("scope__in", ["gate", "api"])), name="approvals_token_scope_valid"
                            )
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(
            _content_type_to("accounts", from_label="approvals"), _content_type_to("approvals", from_label="accounts")
        ),
    ]
