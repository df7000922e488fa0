from django.db import migrations, models


class Migration(migrations.Migration):
    """The hash chain's columns, nullable until 0005 fills them for the rows already there."""

    dependencies = [
        ("activity", "0003_evidence_verbs"),
    ]

    operations = [
        migrations.AlterModelOptions(name="event", options={"ordering": ["-seq"]}),
        migrations.AlterField(model_name="event", name="at", field=models.DateTimeField(db_index=True)),
        migrations.AddField(model_name="event", name="seq", field=models.PositiveBigIntegerField(null=True)),
        migrations.AddField(model_name="event", name="prev_hash", field=models.CharField(max_length=64, null=True)),
        migrations.AddField(model_name="event", name="hash", field=models.CharField(max_length=64, null=True)),
        migrations.AddField(
            model_name="event",
            name="actor_username",
            field=models.CharField(blank=True, default="", max_length=150),
            preserve_default=False,
        ),
    ]
