"""The deployment pages: the list and one deployment (what serves now, its monitor policy, its history),
for members; people's text escaped; a Monitoring entry in the navigation."""

from __future__ import annotations

import pytest
from django.test import Client

from auditportal.accounts.models import User
from auditportal.monitoring import services
from auditportal.monitoring.models import Deployment
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
