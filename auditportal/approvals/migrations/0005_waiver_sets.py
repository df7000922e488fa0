# Waiver sets: a waiver's scope is stored comparison by comparison (WaivedComparison). Each existing
# waiver's one comparison is copied into it (the waiver keeps its id and its own fields); the one live
# waiver per comparison and round becomes the services' rule, checked under the request's row lock
# against every comparison of a scope (a constraint on the waiver's first comparison cannot see them).

import django.db.models.deletion
from django.db import migrations, models


def copy_scopes(apps, schema_editor):
    Waiver = apps.get_model("approvals", "Waiver")
    WaivedComparison = apps.get_model("approvals", "WaivedComparison")
    db = schema_editor.connection.alias
    WaivedComparison.objects.using(db).bulk_create(
        WaivedComparison(
            waiver_id=waiver.pk,
            finding_key=waiver.finding_key,
            document_id=waiver.document_id,
            attribute=waiver.attribute,
            metric=waiver.metric,
            group=waiver.group,
            reference=waiver.reference,
        )
        for waiver in Waiver.objects.using(db).order_by("pk").iterator()
    )


class Migration(migrations.Migration):

    dependencies = [
        ('approvals', '0004_votes_counted_as_cast_pauses_suspensions'),
        ('evidence', '0001_verdict_documents'),
    ]

    operations = [
        migrations.CreateModel(
            name='WaivedComparison',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('finding_key', models.CharField(max_length=32)),
                ('attribute', models.CharField(max_length=511)),
                ('metric', models.CharField(max_length=32)),
                ('group', models.CharField(max_length=511)),
                ('reference', models.CharField(max_length=511)),
            ],
            options={
                'ordering': ['waiver', 'id'],
            },
        ),
        migrations.RemoveConstraint(
            model_name='waiver',
            name='approvals_waiver_one_live_per_comparison',
        ),
        migrations.AddField(
            model_name='waivedcomparison',
            name='document',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='evidence.verdictdocument'),
        ),
        migrations.AddField(
            model_name='waivedcomparison',
            name='waiver',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='comparisons', to='approvals.waiver'),
        ),
        migrations.AddConstraint(
            model_name='waivedcomparison',
            constraint=models.UniqueConstraint(fields=('waiver', 'finding_key'), name='approvals_waived_comparison_once'),
        ),
        # Backwards the table goes, rows and all: nothing to undo.
        migrations.RunPython(copy_scopes, migrations.RunPython.noop),
    ]
