from django.db import migrations

# The function activity/0006 made refuses by raising; its message names TG_OP, so it serves a
# statement-level TRUNCATE trigger as it serves the row-level UPDATE and DELETE one.
REFUSE_TRUNCATE = """
CREATE TRIGGER activity_event_no_truncate
    BEFORE TRUNCATE ON activity_event
    FOR EACH STATEMENT EXECUTE FUNCTION activity_event_refuse_change();
"""
ALLOW_TRUNCATE = "DROP TRIGGER IF EXISTS activity_event_no_truncate ON activity_event;"


def refuse_truncate(apps, schema_editor):
    # PostgreSQL only: SQLite has no TRUNCATE (its DELETE without WHERE is a DELETE, which it has no
    # trigger for either; a SQLite file is only as safe as its file permissions).
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(REFUSE_TRUNCATE, params=None)


def allow_truncate(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(ALLOW_TRUNCATE, params=None)


class Migration(migrations.Migration):
    """PostgreSQL refuses TRUNCATE of the activity log (the row triggers of 0006 do not see it).

    Only the table's owner can still get past it (ALTER TABLE ... DISABLE TRIGGER): the portal runs as
    an application role that does not own its tables (``manage.py db_roles``, docs/governance.md).
    """

    dependencies = [
        ("activity", "0010_dataset_steward_verbs"),
    ]

    operations = [
        migrations.RunPython(refuse_truncate, allow_truncate),
    ]
