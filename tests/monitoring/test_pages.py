"""The deployment pages: the list and one deployment (what serves now, its monitor policy, its history),
for members; people's text escaped; a Monitoring entry in the navigation."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from auditportal.accounts.models import User
from auditportal.monitoring import selectors, services
from auditportal.monitoring.models import Deployment, Incident
from tests.factories import client_for
from tests.monitoring.conftest import Approve, suspend

HOSTILE = '<script>alert("x")</script>'


def test_the_list_shows_each_deployment_with_its_state_and_model(
    deployment: Deployment, approve: Approve, bob: User, carol: User
) -> None:
    approve("credit:4")
    services.deployment_promote(deployment=deployment, model_identifier="credit:4", by=bob)
    services.deployment_create(user=bob, name="fraud/prod")
    page = client_for(carol).get("/monitoring/")
    assert page.status_code == 200
    text = page.content.decode()
    assert '<a href="/monitoring/">Monitoring</a>' in text
    assert 'data-deployment="credit-scoring/prod" data-state="serving"' in text
    assert '<a href="/monitoring/credit-scoring/prod/">credit-scoring/prod</a>' in text
    assert "<code>credit:4</code>" in text
    assert 'data-deployment="fraud/prod" data-state="empty"' in text


def test_the_deployment_page_shows_what_serves_its_policy_and_its_history_escaped(
    deployment: Deployment, approve: Approve, bob: User, dave: User
) -> None:
    Deployment.objects.filter(pk=deployment.pk).update(description=HOSTILE)
    first, second = approve("credit:3"), approve("credit:4")
    services.deployment_promote(deployment=deployment, model_identifier="credit:3", by=bob)
    services.deployment_promote(deployment=deployment, model_identifier="credit:4", by=bob, reason=HOSTILE)
    suspend(second)
    services.deployment_rollback(deployment=deployment, reason="FNR of women above 0.05", from_model="credit:4")
    text = client_for(dave).get("/monitoring/credit-scoring/prod/").content.decode()
    assert HOSTILE not in text
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in text
    assert '<code id="serving-model">credit:3</code>' in text
    assert f'<a href="/approvals/{first.pk}/">review request #{first.pk}</a>' in text
    assert 'id="gate-now">approves it' in text
    assert text.count('data-kind="promoted"') == 2
    assert text.count('data-kind="rolled_back"') == 1
    assert '<td>False-negative rate</td><td class="num">0.05</td>' in text
    assert "the system" in text  # the rollback's actor


def test_an_account_without_a_role_sees_no_deployment(deployment: Deployment, oscar: User) -> None:
    client = client_for(oscar)
    assert client.get("/monitoring/").status_code == 403
    assert client.get("/monitoring/credit-scoring/prod/").status_code == 404
    assert '<a href="/monitoring/">' not in client.get("/account/password/").content.decode()


@pytest.mark.django_db
def test_without_a_session_the_pages_send_to_the_login() -> None:
    response = Client().get("/monitoring/credit-scoring/prod/")
    assert (response.status_code, response["Location"]) == (302, "/login/?next=/monitoring/credit-scoring/prod/")


def test_an_unknown_deployment_is_a_404(carol: User) -> None:
    assert client_for(carol).get("/monitoring/fraud/prod/").status_code == 404


def test_the_activity_log_links_a_promotion_to_its_deployment(
    deployment: Deployment, approve: Approve, bob: User, carol: User
) -> None:
    approve("credit:4")
    services.deployment_promote(deployment=deployment, model_identifier="credit:4", by=bob)
    text = client_for(carol).get("/activity/").content.decode()
    assert "model promoted into a deployment" in text
    assert 'href="/monitoring/credit-scoring/prod/"' in text


# --------------------------------------------------------------------------- charts, alerts, batches, incidents


def _counted(deployment: Deployment, user: User, index: int, women_fn: int = 2) -> None:
    """A counted batch of pre-aggregated counts (gender f/m as the audited file has them)."""
    received = services.batch_receive_counts(
        deployment=deployment,
        user=user,
        batch_id=f"hour-{index}",
        counts={
            "gender": {
                "groups": {
                    "f": {"tp": 60 - women_fn, "fn": women_fn, "fp": 5, "tn": 60},
                    "m": {"tp": 70, "fn": 1, "fp": 6, "tn": 70},
                }
            }
        },
    )
    services.batch_count(batch_id=received.batch.pk)


@pytest.fixture
def serving(deployment: Deployment, approve: Approve, bob: User) -> Deployment:
    approve("credit:4")
    return services.deployment_promote(deployment=deployment, model_identifier="credit:4", by=bob)


def test_the_charts_are_read_in_queries_that_do_not_grow_with_the_looks(serving: Deployment, bob: User) -> None:
    counted: list[int] = []
    for looks in (2, 7):
        while len(counted) < looks:
            _counted(serving, bob, len(counted))
            counted.append(1)
        with CaptureQueriesContext(connection) as queries:
            charts = selectors.deployment_charts(deployment=serving)
        assert charts.looks == looks
        # The latest look (its alerts), then every look's points.
        assert len(queries) == 2, [query["sql"][:120] for query in queries]
    kinds = [figure["kind"] for figure in charts.figures]
    assert kinds.count("rate") == 1
    assert "gap" in kinds
    assert kinds[-1] == "share"
    rate = charts.figures[0]["figure"]["data"]
    assert {trace.get("name") for trace in rate} >= {"f", "m", "limit", "f: breach boundary"}


def test_the_page_draws_the_charts_warns_near_a_limit_and_lists_batches_and_incidents(
    serving: Deployment, bob: User, dave: User
) -> None:
    for index in range(3):
        _counted(serving, bob, index, women_fn=3)  # f: 9 of 180 qualified refused, 5%: at the FNR limit
    incident = Incident.objects.create(
        deployment=serving,
        model_identifier="credit:4",
        reason=HOSTILE,
        cause={"kind": "test"},
        document={"evidence": 1},
        document_sha256="ab" * 32,
    )
    page = client_for(dave).get("/monitoring/credit-scoring/prod/")
    text = page.content.decode()
    assert text.count('class="figure monitor-figure"') >= 3
    assert 'id="monitor-figure-0"' in text
    assert "vendor/plotly/plotly.min.js" in text
    assert 'id="monitor-alerts"' in text
    assert 'data-level="near" data-attribute="gender" data-group="f" data-metric="fnr"' in text
    assert text.count('<tr data-batch="hour-') == 3
    assert 'data-batch="hour-2" data-state="counted"' in text
    assert "gender: f 125, m 147" in text
    assert 'id="deployment-banner"' not in text
    assert f'data-incident="{incident.pk}"' in text
    assert f'<code class="hash">{"ab" * 32}</code>' in text
    assert HOSTILE not in text


def test_the_batches_table_pages(serving: Deployment, bob: User, dave: User) -> None:
    for index in range(selectors.BATCHES_SHOWN + 2):
        _counted(serving, bob, index)
    client = client_for(dave)
    first = client.get("/monitoring/credit-scoring/prod/").content.decode()
    assert first.count('<tr data-batch="hour-') == selectors.BATCHES_SHOWN
    assert 'href="?batches=2#batches">Older</a>' in first
    second = client.get("/monitoring/credit-scoring/prod/?batches=2").content.decode()
    assert second.count('<tr data-batch="hour-') == 2
    assert 'data-batch="hour-0"' in second
    assert 'data-batch="hour-0"' not in first


def test_a_suspended_deployment_says_so_in_a_banner(serving: Deployment, dave: User) -> None:
    from auditportal.approvals.models import ReviewRequest

    suspend(ReviewRequest.objects.get(model_identifier="credit:4"))
    services.deployment_rollback(deployment=serving, reason="FNR of women above 0.05", from_model="credit:4")
    text = client_for(dave).get("/monitoring/credit-scoring/prod/").content.decode()
    assert (
        '<div class="banner bad" id="deployment-banner" role="alert"><strong>Suspended: nothing may serve.</strong>'
        in text
    )
    assert "FNR of women above 0.05" in text
    assert 'id="no-looks"' in text
