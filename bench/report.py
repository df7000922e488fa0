"""Time a decision's signed report as the Celery worker makes it, with its figures and without.

    .venv/bin/python bench/report.py [--trials 20] [--groups 6] [--figures 4] [--runs 3] [--keep] [--dir DIR]

The report of a decision on ``--trials`` trial validations (one verdict document each, one attribute
of ``--groups`` groups, judged by the fairness core under the default policy), two approving votes and
``--figures`` forest plots (fairness/figures/audit.py, of the first documents). In one process, as a
worker: Django set up on a migrated SQLite database in a temporary PORTAL_VAR_DIR, Chromium started
warm (reports.figures.start_warm_export, as each worker process does), and one untimed run first (it
also makes the certificate authority, the organisation's key and both members' certificates, which
happen once in a portal's life). Then ``--runs`` pairs, alternating which goes first:

- with figures: the SVG export of the figures, then render + certify (reports.services.report_generate)
  + two member signatures (report_sign_member);
- without: the same report without figures, render + certify + two signatures.

Each run has its own title, so each is a new report (generation is once per context). The target,
<= 5 s with figures, is checked on the median; the ratio with/without says what the figures cost.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 5.0


def _setup(var_dir: Path) -> None:
    os.environ["PORTAL_VAR_DIR"] = str(var_dir)
    os.environ["DATABASE_URL"] = f"sqlite:///{var_dir / 'bench.sqlite3'}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "auditportal.settings.test"
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _documents(trials: int, groups: int) -> list[Any]:
    import numpy as np

    from auditportal.fairness.documents import freeze, trial_validation_document
    from auditportal.fairness.metricsfile import AttributeCounts
    from auditportal.fairness.report_context import EvidenceDocument
    from auditportal.policies.selectors import policy_active

    policy = policy_active().as_json()
    rng = np.random.default_rng(20261201)
    names = tuple(f"group_{chr(ord('a') + index)}" for index in range(groups))
    documents = []
    for number in range(1, trials + 1):
        cells = []
        for index in range(groups):
            positives = int(rng.integers(150, 600))
            negatives = int(rng.integers(600, 2000))
            recall = 0.8 - 0.02 * index * (number % 3)
            tp = int(positives * recall)
            fp = int(negatives * 0.1)
            cells.append((tp, positives - tp, fp, negatives - fp))
        counts = AttributeCounts(
            columns=("group",), values=tuple((name,) for name in names), groups=names, counts=cells, unknown=12
        )
        document = trial_validation_document(
            counts={"group": counts},
            step=40,
            dataset_version={"name": "credit", "number": 1, "sha256": "0" * 64},
            experiment={"id": 1, "name": "bench", "det_experiment_id": None, "config_yaml": "name: bench\n"},
            trial={"number": number, "det_trial_id": None, "hparams": {"lr": 0.01 * number}},
            policy=policy,
        )
        frozen = freeze(document)
        documents.append(
            EvidenceDocument(label=f"Experiment 1, trial {number}, validation at step 40", **_frozen(frozen))
        )
    return documents


def _frozen(frozen: Any) -> dict[str, str]:
    return {"sha256": frozen.sha256, "canonical": frozen.canonical}


def _context(documents: list[Any], members: list[Any], title: str) -> Any:
    from auditportal.accounts.models import Role
    from auditportal.fairness.report_context import (
        Decision,
        ExperimentProvenance,
        Person,
        ReportContext,
        Subject,
        Vote,
    )
    from auditportal.policies.selectors import policy_active
    from auditportal.reports import builders

    people = [builders.person(member, Role.ETHICS_COMMITTEE) for member in members]
    return ReportContext(
        title=title,
        organisation="Bench organisation",
        subject=Subject(kind="trial", label="Experiment 1, 20 trials", model="bench-model:1"),
        policy=builders.policy_provenance(policy_active()),
        documents=tuple(documents),
        decision=Decision(
            outcome="approved",
            at="2026-12-01T04:00:00+00:00",
            requester=Person(key="bob", name="Bob", role="ML engineer"),
            request_label="Review request #1",
        ),
        votes=tuple(
            Vote(member=person, vote="approve", reason="fit", at="2026-12-01T03:5{index}:00+00:00")
            for index, person in enumerate(people)
        ),
        signatories=tuple(people),
        experiment=ExperimentProvenance(label="Experiment 1", config_sha256="1" * 64, hparams=(("lr", "0.01"),)),
        chain_head=builders.current_chain_head(),
    )


def _figures(documents: list[Any], count: int, tolerance: float) -> tuple[Any, ...]:
    from auditportal.fairness.figures.audit import forest_plot
    from auditportal.fairness.findings import document_attributes
    from auditportal.fairness.report_context import Figure
    from auditportal.reports import figures

    made = []
    for document in documents[:count]:
        plot = forest_plot(document_attributes(document.document), tolerance=tolerance)
        assert plot is not None
        made.append(Figure(title=f"Forest plot: {document.label}", svg=figures.figure_svg(plot)))
    return tuple(made)


def _one(documents: list[Any], members: list[Any], figure_count: int, title: str) -> tuple[float, int]:
    import dataclasses

    from auditportal.reports import services

    start = time.perf_counter()
    context = _context(documents, members, title)
    if figure_count:
        context = dataclasses.replace(
            context, figures=_figures(documents, figure_count, tolerance=context.policy.tolerance)
        )
    report = services.report_generate(context=context)
    for member in members:
        services.report_sign_member(report=report, member=member)
    return time.perf_counter() - start, report.pages


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--groups", type=int, default=6)
    parser.add_argument("--figures", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (reports, database)")
    parser.add_argument("--dir", type=Path, help="work here instead of a temporary directory")
    args = parser.parse_args()
    if not 1 <= args.figures <= args.trials:
        parser.error("--figures must be between 1 and --trials")

    directory = args.dir or Path(tempfile.mkdtemp(prefix="bench-report-"))
    directory.mkdir(parents=True, exist_ok=True)
    _setup(directory)
    from auditportal.accounts.models import Role, RoleGrant, User
    from auditportal.reports import figures

    members = []
    for username in ("frank", "gina"):
        user = User.objects.create_user(username=username)
        RoleGrant.objects.create(user=user, role=Role.ETHICS_COMMITTEE)
        members.append(user)
    documents = _documents(args.trials, args.groups)
    figures.start_warm_export()
    try:
        _one(documents, members, args.figures, "warm-up with figures")  # keys, certificates, caches
        _one(documents, members, 0, "warm-up without figures")
        with_figures: list[float] = []
        without: list[float] = []
        pages = {}
        for run in range(args.runs):
            order = [(args.figures, with_figures), (0, without)]
            for count, times in order if run % 2 == 0 else reversed(order):
                seconds, pages[count] = _one(documents, members, count, f"run {run} with {count} figures")
                times.append(seconds)
    finally:
        figures.stop_warm_export()
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)
        else:
            print(f"kept {directory}")

    with_median, without_median = statistics.median(with_figures), statistics.median(without)
    print(
        f"report of {args.trials} trials x {args.groups} groups, 2 member signatures "
        f"({pages[args.figures]} pages with figures, {pages[0]} without), median of {args.runs} warm runs:"
    )
    print(
        f"  with {args.figures} figures (SVG export + render + certify + sign x2): {with_median:.2f} s "
        f"(runs: {', '.join(f'{value:.2f}' for value in with_figures)})"
    )
    print(
        f"  without figures (render + certify + sign x2):              {without_median:.2f} s "
        f"(runs: {', '.join(f'{value:.2f}' for value in without)})"
    )
    print(
        f"  figures cost x{with_median / without_median:.2f}; "
        f"with figures / target {TARGET_S:.0f} s = {with_median / TARGET_S:.2f}"
    )
    ok = with_median <= TARGET_S
    print(f"target <= {TARGET_S:.0f} s warm with figures: {'MET' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
