"""The deployment page with a year of hourly batches, against the same page with none.

    .venv/bin/python bench/monitoring_page.py [--looks 8760] [--repeat 7] [--dir DIR]

A deployment with ``--looks`` counted batches (500 predictions each, two sensitive attributes: gender
with 2 groups, age with 3) and a look after each, judged by the monitor's statistics under the default
monitor policy in tumbling windows of 50 batches (fairness/statistics/monitor.judge_look, as the worker
judges them: FNR, FPR and selection-rate gaps, the FNR limit, group-share drift), the women's FNR
creeping from 3% towards the 5% limit so that the page warns. Written with bulk_create into a migrated
SQLite database in a temporary PORTAL_VAR_DIR. Judging takes about 8 ms a look, so the first
``--distinct`` looks (default 600: 12 windows) are judged and the rest repeat them in turn (each look's
JSON as large as a judged one's; the shape of the series is what the page's cost depends on).

Measured in one process through Django's test client as a logged-in reviewer, after one untimed
request of each: ``GET /monitoring/<name>/`` (the whole request: middleware, selectors, queries,
figures, template), median of ``--repeat``, for this deployment and, alternating, for a deployment with
no batch (the baseline: the page without charts). Target: <= 300 ms for 8,760 looks. The looks carry their
points as look_write stores them (fairness/figures/lookpoints). ``main()``
returns the result as a dict too (bench/monitoring.py prints it beside its own).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 0.300
WINDOW = 50
ROWS = 500
GROUPS = {"gender": {"men": 0.55, "women": 0.45}, "age": {"young": 0.3, "middle": 0.5, "old": 0.2}}
TRAINING_ROWS = 20_000


def _setup(var_dir: Path) -> None:
    os.environ["PORTAL_VAR_DIR"] = str(var_dir)
    os.environ["DATABASE_URL"] = f"sqlite:///{var_dir / 'bench.sqlite3'}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "auditportal.settings.test"
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _judgements(looks: int, distinct: int) -> list[tuple[dict[str, Any], dict[str, Any], int]]:
    """Per look: the batch's counts, the look's judgements per attribute, and the window's rows."""
    import numpy as np

    from auditportal.fairness.statistics.monitor import (
        DriftLimit,
        GapLimit,
        MonitorPolicy,
        RateLimit,
        WindowCounts,
        judge_look,
    )

    policies = {}
    for attribute, shares in GROUPS.items():
        training = {group: int(TRAINING_ROWS * share) for group, share in shares.items()}
        groups = tuple(sorted(training))
        policies[attribute] = MonitorPolicy(
            groups=groups,
            reference=max(groups, key=training.__getitem__),
            rate_limits=(RateLimit("fnr", 0.05),),
            gap_limits=(GapLimit("fnr", 0.05), GapLimit("fpr", 0.05), GapLimit("selection_rate", 0.1)),
            drift=DriftLimit(limit=0.1, training=training),
            alpha=0.05 / len(GROUPS),
            min_rows=100,
        )
    rng = np.random.default_rng(8760)
    made: list[tuple[dict[str, Any], dict[str, Any], int]] = []
    window: dict[str, dict[str, list[int]]] = {}
    for index in range(looks):
        if index >= distinct:
            made.append(made[index % distinct])
            continue
        if index % WINDOW == 0:
            window = {attribute: {group: [0] * 4 for group in shares} for attribute, shares in GROUPS.items()}
        creep = 0.03 + 0.018 * index / max(distinct - 1, 1)  # the women's FNR, 3% -> 4.8%
        batch: dict[str, Any] = {}
        judgements: dict[str, Any] = {}
        for attribute, shares in GROUPS.items():
            rows = rng.multinomial(ROWS, list(shares.values()))
            cells_by_group: dict[str, dict[str, int]] = {}
            for (group, _), n in zip(shares.items(), rows.tolist(), strict=True):
                positives = int(rng.binomial(n, 0.3))
                fnr = creep if group == "women" else 0.03
                fn = int(rng.binomial(positives, fnr))
                fp = int(rng.binomial(n - positives, 0.1))
                cells = [positives - fn, fn, fp, n - positives - fp]
                cells_by_group[group] = dict(zip(("tp", "fn", "fp", "tn"), cells, strict=True))
                window[attribute][group] = [a + b for a, b in zip(window[attribute][group], cells, strict=True)]
            batch[attribute] = {"groups": cells_by_group, "unknown": {}}
            counts = {group: WindowCounts(*cells) for group, cells in window[attribute].items()}
            judgements[attribute] = judge_look(policies[attribute], counts, window=index // WINDOW + 1).as_json()
        made.append((batch, judgements, (index % WINDOW + 1) * ROWS))
    return made


def _build(looks: int, distinct: int) -> tuple[str, str]:
    """The deployment with ``looks`` looks and the baseline without; their names."""
    import hashlib

    from auditportal.accounts.models import Role, RoleGrant, User
    from auditportal.monitoring import selectors, services
    from auditportal.monitoring.models import Look, PredictionBatch
    from auditportal.monitoring.services.batches import look_points_fields

    engineer = User.objects.create_user(username="erin")
    RoleGrant.objects.create(user=engineer, role=Role.ML_ENGINEER)
    deployment = services.deployment_create(user=engineer, name="bench/year", description="A year of hourly batches")
    services.deployment_create(user=engineer, name="bench/empty", description="No batch")
    policy = selectors.monitor_policy_active(deployment=deployment)
    judged = _judgements(looks, distinct)
    batches = PredictionBatch.objects.bulk_create(
        [
            PredictionBatch(
                deployment=deployment,
                batch_id=f"hour-{index:05d}",
                model_identifier="credit:1",
                sha256=hashlib.sha256(str(index).encode()).hexdigest(),
                format="counts",
                size_bytes=400,
                received_by=engineer,
                state="counted",
                rows=ROWS,
                counts=counts,
                position=index + 1,
            )
            for index, (counts, _, _) in enumerate(judged)
        ],
        batch_size=500,
    )
    Look.objects.bulk_create(
        [
            Look(
                deployment=deployment,
                seq=index + 1,
                model_identifier="credit:1",
                policy=policy,
                window=index // WINDOW + 1,
                batch=batch,
                batches=[batch.batch_id],
                rows=rows,
                judgements=judgements,
                status=min((j["status"] for j in judgements.values()), key=_worst),
                breached=any(j["breached"] for j in judgements.values()),
                **look_points_fields(judgements),  # as look_write stores them
            )
            for index, (batch, (_, judgements, rows)) in enumerate(zip(batches, judged, strict=True))
        ],
        batch_size=500,
    )
    return deployment.name, "bench/empty"


def _worst(status: str) -> int:
    return ("breach", "unseen", "watching", "too_few", "within").index(status)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--looks", type=int, default=8760)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--distinct", type=int, default=600, help="looks judged; the rest repeat them")
    parser.add_argument("--dir", type=Path, help="work here instead of a temporary directory")
    args = parser.parse_args(argv)
    if args.looks < 1 or args.repeat < 1 or args.distinct < 1:
        parser.error("--looks, --repeat and --distinct must be at least 1")
    directory = args.dir or Path(tempfile.mkdtemp(prefix="bench-monitoring-page-"))
    directory.mkdir(parents=True, exist_ok=True)
    if "DJANGO_SETTINGS_MODULE" not in os.environ:
        _setup(directory)
    from django.test import Client
    from django.test.utils import setup_test_environment

    from auditportal.accounts.models import Role, RoleGrant, User

    started = time.perf_counter()
    name, baseline = _build(args.looks, min(args.distinct, args.looks))
    print(f"built {args.looks:,} looks in {time.perf_counter() - started:.1f} s", flush=True)
    reviewer = User.objects.create_user(username="rita")
    RoleGrant.objects.create(user=reviewer, role=Role.REVIEWER)
    setup_test_environment()  # the test client's host, as in the test suite
    client = Client()
    client.force_login(reviewer)
    times: dict[str, list[float]] = {name: [], baseline: []}
    sizes = {}
    for target in (name, baseline):  # untimed: caches, templates
        response = client.get(f"/monitoring/{target}/")
        assert response.status_code == 200, response.status_code
        sizes[target] = len(response.content)
    for run in range(args.repeat):
        for target in (name, baseline) if run % 2 == 0 else (baseline, name):
            begun = time.perf_counter()
            response = client.get(f"/monitoring/{target}/")
            times[target].append(time.perf_counter() - begun)
            assert response.status_code == 200
    page, empty = statistics.median(times[name]), statistics.median(times[baseline])
    result = {
        "looks": args.looks,
        "page_s": page,
        "baseline_s": empty,
        "ratio": page / empty,
        "bytes": sizes[name],
        "target_s": TARGET_S,
        "ok": page <= TARGET_S,
    }
    print(
        f"deployment page, {args.looks:,} looks: {page * 1000:.0f} ms median of {args.repeat} "
        f"({sizes[name] / 1e6:.2f} MB); without batches: {empty * 1000:.0f} ms; ratio {page / empty:.1f}x; "
        f"target <= {TARGET_S * 1000:.0f} ms: {'met' if result['ok'] else 'MISSED'}"
    )
    return result


if __name__ == "__main__":
    sys.exit(0 if main()["ok"] else 1)
