"""API tokens now belong to the accounts app (accounts/0002 takes the model over with its table): the
model leaves the approvals app's state only; the table and its rows stay."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0002_api_token_scope"),
        ("accounts", "0002_api_token_from_approvals"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="ApiToken")],
            database_operations=[],
        ),
    ]
