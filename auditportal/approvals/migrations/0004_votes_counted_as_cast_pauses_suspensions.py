# Votes record the role they were cast through (existing ones: the committee role, which the vote
# service required); paused rounds, their resumptions, and suspended requests.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('approvals', '0003_api_token_to_accounts'),
        ('audits', '0003_prediction_audit_retirement'),
        ('evidence', '0001_verdict_documents'),
        ('experiments', '0008_slots_asha_rungs_cancel_and_launch_heartbeat'),
        ('policies', '0002_fairness_policy_approval_quorum'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ApprovalSuspension',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('round', models.PositiveIntegerField()),
                ('state_before', models.CharField(choices=[('draft', 'Draft'), ('submitted', 'Submitted'), ('in_review', 'In review'), ('approved', 'Approved'), ('rejected', 'Rejected'), ('withdrawn', 'Withdrawn'), ('revoked', 'Revoked'), ('suspended', 'Suspended')], max_length=16)),
                ('reason', models.TextField()),
                ('cause', models.JSONField(default=dict)),
                ('suspended_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'ordering': ['-suspended_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='RoundPause',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('round', models.PositiveIntegerField()),
                ('role', models.CharField(choices=[('data_steward', 'Data steward'), ('ml_engineer', 'ML engineer'), ('reviewer', 'Reviewer'), ('ethics_committee', 'Ethics-committee member'), ('admin', 'Administrator')], max_length=32)),
                ('change', models.CharField(choices=[('granted', 'granted'), ('revoked', 'revoked')], max_length=8)),
                ('paused_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'ordering': ['request', 'paused_at', 'id'],
            },
        ),
        migrations.CreateModel(
            name='RoundResumption',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('round', models.PositiveIntegerField()),
                ('reason', models.TextField()),
                ('resumed_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'ordering': ['request', 'resumed_at', 'id'],
            },
        ),
        migrations.RemoveConstraint(
            model_name='reviewrequest',
            name='approvals_request_state_valid',
        ),
        migrations.AddField(
            model_name='reviewvote',
            name='voter_role',
            field=models.CharField(choices=[('data_steward', 'Data steward'), ('ml_engineer', 'ML engineer'), ('reviewer', 'Reviewer'), ('ethics_committee', 'Ethics-committee member'), ('admin', 'Administrator')], default='ethics_committee', max_length=32),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name='waivervote',
            name='voter_role',
            field=models.CharField(choices=[('data_steward', 'Data steward'), ('ml_engineer', 'ML engineer'), ('reviewer', 'Reviewer'), ('ethics_committee', 'Ethics-committee member'), ('admin', 'Administrator')], default='ethics_committee', max_length=32),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name='reviewrequest',
            name='state',
            field=models.CharField(choices=[('draft', 'Draft'), ('submitted', 'Submitted'), ('in_review', 'In review'), ('approved', 'Approved'), ('rejected', 'Rejected'), ('withdrawn', 'Withdrawn'), ('revoked', 'Revoked'), ('suspended', 'Suspended')], default='draft', max_length=16),
        ),
        migrations.AddConstraint(
            model_name='reviewrequest',
            constraint=models.CheckConstraint(condition=models.Q(('state__in', ['draft', 'submitted', 'in_review', 'approved', 'rejected', 'withdrawn', 'revoked', 'suspended'])), name='approvals_request_state_valid'),
        ),
        migrations.AddField(
            model_name='approvalsuspension',
            name='request',
            field=models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='suspension', to='approvals.reviewrequest'),
        ),
        migrations.AddField(
            model_name='approvalsuspension',
            name='suspended_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='roundpause',
            name='changed_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='roundpause',
            name='request',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='pauses', to='approvals.reviewrequest'),
        ),
        migrations.AddField(
            model_name='roundpause',
            name='user',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='roundresumption',
            name='pauses',
            field=models.ManyToManyField(related_name='resumptions', to='approvals.roundpause'),
        ),
        migrations.AddField(
            model_name='roundresumption',
            name='request',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='resumptions', to='approvals.reviewrequest'),
        ),
        migrations.AddField(
            model_name='roundresumption',
            name='resumed_by',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddConstraint(
            model_name='approvalsuspension',
            constraint=models.CheckConstraint(condition=models.Q(('reason', ''), _negated=True), name='approvals_suspension_has_reason'),
        ),
        migrations.AddConstraint(
            model_name='roundpause',
            constraint=models.CheckConstraint(condition=models.Q(('change__in', ['granted', 'revoked'])), name='approvals_pause_change_valid'),
        ),
        migrations.AddConstraint(
            model_name='roundresumption',
            constraint=models.CheckConstraint(condition=models.Q(('reason', ''), _negated=True), name='approvals_resumption_has_reason'),
        ),
    ]
