from django.db import migrations, models

REFUSE_FUNCTION = """
CREATE FUNCTION activity_event_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'activity_event is append-only: % refused (the activity log is hash-chained evidence)', TG_OP
        USING ERRCODE = 'restrict_violation';
END;
$$;
CREATE TRIGGER activity_event_append_only
    BEFORE UPDATE OR DELETE ON activity_event
    FOR EACH ROW EXECUTE FUNCTION activity_event_refuse_change();
"""
DROP_FUNCTION = """
DROP TRIGGER IF EXISTS activity_event_append_only ON activity_event;
DROP FUNCTION IF EXISTS activity_event_refuse_change();
"""


def refuse_update_and_delete(apps, schema_editor):
    # PostgreSQL only. TRUNCATE stays possible: Django's test database flush uses it.
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(REFUSE_FUNCTION, params=None)


def allow_update_and_delete(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP_FUNCTION, params=None)


class Migration(migrations.Migration):
    """The chain's columns become required and unique (no fork); PostgreSQL refuses UPDATE and DELETE."""

    dependencies = [
        ("activity", "0005_event_chain_backfill"),
    ]

    operations = [
        migrations.AlterField(model_name="event", name="seq", field=models.PositiveBigIntegerField()),
        migrations.AlterField(model_name="event", name="prev_hash", field=models.CharField(max_length=64)),
        migrations.AlterField(model_name="event", name="hash", field=models.CharField(max_length=64)),
        migrations.AddConstraint(
            model_name="event",
            constraint=models.UniqueConstraint(fields=("seq",), name="activity_event_seq_unique"),
        ),
        migrations.AddConstraint(
            model_name="event",
            constraint=models.UniqueConstraint(fields=("prev_hash",), name="activity_event_prev_hash_unique"),
        ),
        migrations.AddConstraint(
            model_name="event",
            constraint=models.UniqueConstraint(fields=("hash",), name="activity_event_hash_unique"),
        ),
        migrations.AddConstraint(
            model_name="event",
            constraint=models.CheckConstraint(condition=models.Q(seq__gte=1), name="activity_event_seq_positive"),
        ),
        migrations.RunPython(refuse_update_and_delete, allow_update_and_delete),
    ]
