"""``manage.py simulate_traffic`` and the monitoring demo (``seed_demo_deployment``): the demo seeded
once however often it runs; simulated batches counted by the worker's task as the generator drew them
and near the rates asked for; an injected drift of women's FNR (3% -> 8%, limit 5%) breached, the
model suspended and the deployment rolled back to the model before it; bad arguments refused in one
line with exit code 2; the command lines the docs show parse."""

from __future__ import annotations

import io
import math
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import ApiToken, User
from auditportal.approvals.models import RequestState, ReviewRequest
from auditportal.approvals.selectors import gate_answer
from auditportal.celery import app
from auditportal.fairness.files import traffic as gen
from auditportal.monitoring import selectors
from auditportal.monitoring import tasks as monitoring_tasks  # registers the worker's tasks
from auditportal.monitoring.management.commands import seed_demo_deployment as demo
from auditportal.monitoring.management.commands import simulate_traffic
from auditportal.monitoring.models import (
    BatchState,
    Deployment,
    DeploymentChange,
    DeploymentState,
    Incident,
    PredictionBatch,
)
from auditportal.outbox.models import OutboxMessage
from tests.factories import PASSWORD

ROOT = Path(__file__).resolve().parents[2]
WORKER_TASKS = (monitoring_tasks.batch_count_task.name, monitoring_tasks.labels_count_task.name)


@pytest.fixture
def world(db: None, settings: SettingsWrapper, dataset_storage: Path, tmp_path: Path) -> Deployment:
    """The demo as `make run` seeds it: demo-credit:1 promoted, then demo-credit:2."""
    settings.DEBUG = True
    call_command("seed_demo", "--password", PASSWORD, stdout=io.StringIO())
    call_command(
        "seed_demo_deployment", "--password", PASSWORD, "--token-file", tmp_path / "token", stdout=io.StringIO()
    )
    return Deployment.objects.get(name=demo.DEPLOYMENT)


def work() -> int:
    """The worker: runs each queued count (batches, then labels as they come), oldest first, once."""
    done = 0
    while message := OutboxMessage.objects.filter(name__in=WORKER_TASKS).order_by("pk").first():
        app.tasks[message.name].apply(args=message.args, kwargs=message.kwargs).get()
        message.delete()
        done += 1
    return done


@pytest.fixture
def worker_after_each_post(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that keeps up: each post is counted and judged before the next one is made."""
    post = simulate_traffic.ServicePoster.post

    def posted(self: simulate_traffic.ServicePoster, **kwargs: Any) -> str:
        line = post(self, **kwargs)
        work()
        return line

    monkeypatch.setattr(simulate_traffic.ServicePoster, "post", posted)


def simulate(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("simulate_traffic", "--deployment", demo.DEPLOYMENT, *args, stdout=out)
    except CommandError as exc:
        return exc.returncode, str(exc)
    return 0, out.getvalue()


def test_the_demo_is_seeded_once_however_often_make_run_seeds_it(world: Deployment, tmp_path: Path) -> None:
    assert (world.state, world.model_identifier) == (DeploymentState.SERVING, demo.MODELS[1])
    assert [c.model_identifier for c in world.changes.order_by("seq")] == list(demo.MODELS)
    for model in demo.MODELS:
        assert gate_answer(model_identifier=model).approved  # type: ignore[union-attr]
    before = (ReviewRequest.objects.count(), DeploymentChange.objects.count(), Deployment.objects.count())
    first_token = (tmp_path / "token").read_text().strip()

    out = io.StringIO()
    call_command("seed_demo_deployment", "--password", PASSWORD, "--token-file", tmp_path / "token", stdout=out)

    assert "demo-credit/prod exists (serving: demo-credit:2): kept" in out.getvalue()
    assert (ReviewRequest.objects.count(), DeploymentChange.objects.count(), Deployment.objects.count()) == before
    live = ApiToken.objects.filter(user__username=demo.ACCOUNT, revoked_at__isnull=True)
    assert live.count() == 1, "the earlier demo token is revoked"
    assert (tmp_path / "token").read_text().strip() != first_token
    assert (tmp_path / "token").stat().st_mode & 0o777 == 0o600


def test_simulated_batches_are_counted_as_drawn_and_near_the_rates_asked_for(world: Deployment) -> None:
    code, out = simulate(
        "--account",
        demo.ACCOUNT,
        "--batches",
        "3",
        "--batch-size",
        "4000",
        "--seed",
        "7",
        "--batch-prefix",
        "t",
        "--fnr",
        "0.04",
        "--fpr",
        "0.2",
    )
    assert code == 0, out
    assert work() == 3
    batches = list(PredictionBatch.objects.filter(deployment=world).order_by("batch_id"))
    assert [b.batch_id for b in batches] == ["t-00001", "t-00002", "t-00003"]
    assert all(b.state == BatchState.COUNTED and b.model_identifier == demo.MODELS[1] for b in batches)
    reference = selectors.model_reference(deployment=world, model_identifier=demo.MODELS[1])
    shares = gen.shares_from_training(reference.training)  # the audited data's group shares
    traffic = gen.Traffic(shares=shares, fnr=0.04, fpr=0.2)
    cells = {"tp": 0, "fn": 0, "fp": 0, "tn": 0}
    for number, batch in enumerate(batches, start=1):
        # What the worker counted is exactly what the generator drew for this seed and batch.
        table = gen.traffic_batch(traffic, rows=4000, seed=7, number=number).to_pandas()
        female = table[table["gender"] == "female"]
        counted = batch.counts["gender"]["groups"]["female"]  # type: ignore[index]
        assert counted["fn"] == int(((female["label"] == 1) & (female["prediction"] == 0)).sum())
        assert counted["fp"] == int(((female["label"] == 0) & (female["prediction"] == 1)).sum())
        assert batch.counts["gender"]["unknown"]["tp"] == int(  # type: ignore[index]
            ((table["gender"] == gen.UNKNOWN) & (table["label"] == 1) & (table["prediction"] == 1)).sum()
        )
        for group in batch.counts["age_group"]["groups"].values():  # type: ignore[index]
            for cell in cells:
                cells[cell] += group[cell]
    rows = 12_000
    positives = cells["tp"] + cells["fn"]
    for observed, expected, n in (
        (positives / rows, 0.55, rows),
        (cells["fn"] / positives, 0.04, positives),
        (cells["fp"] / (rows - positives), 0.2, rows - positives),
    ):
        assert abs(observed - expected) < 4 * math.sqrt(expected * (1 - expected) / n), (observed, expected)
    female_rows = sum(int(b.counts["gender"]["groups"]["female"][c]) for b in batches for c in cells)  # type: ignore[index,misc]
    share = shares["gender"]["female"]
    assert abs(female_rows / rows - share) < 4 * math.sqrt(share * (1 - share) / rows)


def test_labels_posted_later_by_row_key_join_the_counts(world: Deployment) -> None:
    code, out = simulate("--account", demo.ACCOUNT, "--batches", "1", "--batch-size", "500", "--labels-later")
    assert code == 0, out
    assert "labels received" in out
    work()
    batch = PredictionBatch.objects.get(deployment=world)
    assert batch.counts["gender"]["groups"]["male"]["unlabelled"] > 0  # type: ignore[index]
    labels = batch.labels.get()
    assert labels.counts is not None
    moved = sum(  # the delta moves every unlabelled row into a cell
        group["tp"] + group["fn"] + group["fp"] + group["tn"] for group in labels.counts["gender"]["groups"].values()
    )
    assert moved + sum(labels.counts["gender"]["unknown"][c] for c in ("tp", "fn", "fp", "tn")) == 500


def test_an_injected_drift_breaches_suspends_the_model_and_rolls_back_to_the_one_before(
    world: Deployment, worker_after_each_post: None
) -> None:
    code, out = simulate(
        "--account",
        demo.ACCOUNT,
        "--batches",
        "60",
        "--batch-size",
        "2000",
        "--seed",
        "3",
        "--drift-after",
        "2",
        "--drift-group",
        "gender=female",
        "--drift-fnr",
        "0.08",
    )
    assert code == 0, out
    assert "demo-credit:2 no longer serves in demo-credit/prod (now: demo-credit:1)." in out
    world.refresh_from_db()
    assert (world.state, world.model_identifier) == (DeploymentState.ROLLED_BACK, demo.MODELS[0])
    incident = Incident.objects.get(deployment=world)
    assert incident.model_identifier == demo.MODELS[1]
    assert "female" in incident.reason
    posted = PredictionBatch.objects.filter(deployment=world).count()
    assert 3 < posted < 60, "the drift was found, and the simulation stopped feeding it"
    assert not gate_answer(model_identifier=demo.MODELS[1]).approved  # type: ignore[union-attr]
    assert ReviewRequest.objects.get(model_identifier=demo.MODELS[1], state=RequestState.SUSPENDED)
    print(f"detected after {posted - 2} drifted batches of 2,000 rows")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--deployment", "fraud/prod", "--account", "demo-scoring"], "--deployment 'fraud/prod': No deployment"),
        (
            ["--drift-group", "martian", "--drift-fnr", "0.08"],
            "--drift-group 'martian' is not a group of the model's data",
        ),
        (["--drift-group", "colour=red", "--drift-fnr", "0.08"], "the model has no attribute 'colour'"),
        (["--drift-group", "female"], "--drift-group and --drift-fnr (or --drift-fpr) go together"),
        (["--drift-group", "female", "--drift-fnr", "1.5"], "--drift-fnr is a rate between 0 and 1, not 1.5"),
        (["--batches", "0"], "--batches must be at least 1, not 0"),
        (["--interval", "-1"], "--interval must be 0 or more seconds"),
    ],
)
def test_bad_arguments_are_refused_in_one_line_with_exit_code_2(
    world: Deployment, args: list[str], message: str
) -> None:
    if "--deployment" in args:
        out = io.StringIO()
        with pytest.raises(CommandError) as raised:
            call_command("simulate_traffic", *args, stdout=out)
        code, text = raised.value.returncode, str(raised.value)
    else:
        code, text = simulate("--account", demo.ACCOUNT, *args)
    assert code == simulate_traffic.USAGE
    assert message in text
    assert not PredictionBatch.objects.exists()


def test_who_posts_must_be_named_and_hold_a_monitoring_token(world: Deployment, bob: User) -> None:
    assert simulate() == (2, "name who posts: --account (in-process) or --url with a monitoring token")
    code, text = simulate("--account", "bob")
    assert (code, text) == (2, "--account 'bob': no active account holding a monitoring token")
    code, text = simulate("--url", "ftp://x", "--token-file", __file__)
    assert code == 2
    assert "--url must be http(s)://HOST[:PORT]" in text


def test_the_command_lines_the_docs_show_parse_and_help_names_them() -> None:
    docs = "\n".join((ROOT / name).read_text() for name in ("docs/monitoring.md", "README.md", "bin/run-portal"))
    # A shell line continued with a backslash is one command line.
    lines = re.findall(r"manage\.py simulate_traffic --[^\n]*", docs.replace("\\\n", " "))
    assert len(lines) >= 4, lines
    parser = simulate_traffic.Command().create_parser("manage.py", "simulate_traffic")
    for line in lines:
        words = shlex.split(re.split(r"[#>&`]", line.split("simulate_traffic", 1)[1])[0].rstrip("\"' "))
        parser.parse_args(words)  # argparse exits on anything it does not know
    help_text = parser.format_help()
    for flag in ("--drift-after", "--drift-group", "--drift-fnr", "--labels-later", "--url", "--token-file"):
        assert flag in help_text
    assert "exit codes: 0" in help_text
