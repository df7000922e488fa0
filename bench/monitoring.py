"""A production batch of 1,000,000 predictions, from the start of its post to its judgement readable
through the API, against a whole-process pyarrow read of the same file; then the deployment page.

    .venv/bin/python bench/monitoring.py [--rows 1000000] [--pairs 3] [--database-url URL]
        [--broker-url URL] [--keep] [--dir DIR] [--skip-page]

1. The judged target (issue 29): a real portal on loopback (gunicorn, ``auditportal.wsgi``, production
   settings with DEBUG off, as bench/api_load.py starts it) and a real Celery worker (``celery -A
   auditportal worker``, on kombu's filesystem transport under the temporary PORTAL_VAR_DIR as ``make
   run`` has it, or ``--broker-url``, e.g. ``redis://127.0.0.1:6379/7``), on a fresh SQLite database
   (or ``--database-url``, e.g. PostgreSQL, dropped, created and migrated here). Seeded: a deployment serving a model
   that two committee members approved (the tests' approval helpers, a prediction audit of the gender
   attribute) and a monitoring token. Timed: ``POST /api/v1/deployments/<name>/-/batches/`` of the
   file (multipart, as ``requests`` sends it) until ``GET .../-/batches/<id>/`` answers the batch
   counted with its look (polled every 10 ms): the request, the broker, the worker's counting and the
   database writes. Baseline: a whole ``python -c`` process that reads the same file with
   ``pyarrow.csv.read_csv`` or ``pyarrow.parquet.read_table``. Pairs run one after the other, the order
   alternating, after untimed posts of small batches, several per gunicorn worker at once (each
   worker's and the Celery worker's first-call costs); the target, <= 2x, is checked on the median of
   the per-pair ratios, per file. Each post also prints where its time went (the batch row written,
   the look written, by the server's clock).

   Files (id, score, gender, label; 42% f, 42% m, 16% unknown, as the approved model's training
   data, and a model within the default limits, so no batch breaches): CSV and Parquet with every
   label known; and CSV and Parquet with a row key and no label yet ("labels come later"): every
   row stays pending for its label.
2. The deployment page with 8,760 batches (a year of hourly batches): bench/monitoring_page.py's
   ``main()``, when that file exists (``--skip-page`` skips it).
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import requests
from api_load import WORKERS, free_port, server_env, start_server
from benchkit import ensure_database, in_child

REPO = Path(__file__).resolve().parents[1]
TARGET = 2.0
DEPLOYMENT = "credit-scoring/prod"
MODEL = "credit:4"
POLL = 0.01
WAIT = 600.0
# name, format, with row key and no labels
VARIANTS = (("csv", "csv", False), ("parquet", "parquet", False), ("csv, labels later", "csv", True),
            ("parquet, labels later", "parquet", True))  # fmt: skip


def generate(path: Path, rows: int, *, file_format: str, labels_later: bool, seed: int = 20261207) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    gender = np.array(["f", "m", "unknown"], dtype=object)[rng.choice(3, size=rows, p=[0.42, 0.42, 0.16])]
    label = rng.random(rows) < 0.4
    # FNR about 1%, FPR about 10% in every group: within the default limits (FNR <= 5%, gaps).
    selected = np.where(label, rng.random(rows) < 0.99, rng.random(rows) < 0.10)
    score = np.where(selected, 0.5 + rng.random(rows) / 2, rng.random(rows) / 2).round(4)
    columns: dict[str, Any] = {}
    if labels_later:
        columns["id"] = pa.array([f"r{index:09d}" for index in range(rows)], pa.string())
    columns["score"] = pa.array(score)
    columns["gender"] = pa.array(gender, pa.string())
    columns["label"] = pa.nulls(rows, pa.int8()) if labels_later else pa.array(label.astype(np.int8))
    table = pa.table(columns)
    if file_format == "csv":
        pacsv.write_csv(table, path, write_options=pacsv.WriteOptions(quoting_style="needed"))
    else:
        pq.write_table(table, path)


def _generate(directory: str, rows: int, queue: Any) -> None:
    for name, file_format, later in VARIANTS:
        generate(file_of(Path(directory), name, file_format), rows, file_format=file_format, labels_later=later)
    generate(Path(directory) / "warm-up.csv", 2_000, file_format="csv", labels_later=False)
    queue.put(None)


def file_of(directory: Path, name: str, file_format: str) -> Path:
    return directory / f"batch-{name.replace(', ', '-').replace(' ', '-')}.{file_format}"


def fresh_database(url: str) -> None:
    """The PostgreSQL database ``url`` names, dropped and created empty (what flush did: it
    erased everything too, but PostgreSQL's activity log refuses the TRUNCATE that flush sends)."""
    from urllib.parse import urlparse

    import psycopg

    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    with psycopg.connect(parsed._replace(path="/postgres").geturl(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    ensure_database(url)


def seed() -> str:
    """In a child with Django set up (production settings): the approved model serving in the
    deployment, and a monitoring token; returns the token's secret."""
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from auditportal.accounts import services as account_services
    from auditportal.accounts.models import Role, TokenScope
    from auditportal.approvals import services as approval_services
    from auditportal.evidence.selectors import verdict_document_of_audit
    from auditportal.monitoring import services
    from tests.approvals.conftest import approved
    from tests.factories import PredictionAuditFactory, make_user

    bob = make_user("bob", [Role.ML_ENGINEER])
    carol = make_user("carol", [Role.REVIEWER])
    members = [make_user("dave", [Role.ETHICS_COMMITTEE]), make_user("frank", [Role.ETHICS_COMMITTEE])]
    erin = make_user("erin", [Role.ADMIN])
    audit = PredictionAuditFactory.create(created_by=bob)
    request = approval_services.review_request_create(
        user=bob,
        title="Credit model",
        intended_use="Pre-screening of loan applications",
        documents=[verdict_document_of_audit(audit=audit)],
        model_identifier=MODEL,
    )
    approved(request, carol, members)
    deployment = services.deployment_create(user=bob, name=DEPLOYMENT, description="Loan pre-screening")
    services.deployment_promote(deployment=deployment, model_identifier=MODEL, by=bob)
    made = account_services.api_token_create(
        user=erin, account="scoring-service", name="bench", days=1, scope=TokenScope.MONITORING
    )
    return str(made.secret)


def _seed_child(env: dict[str, str], queue: Any) -> None:
    os.environ.update(env)
    queue.put(seed())


def start_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    command = [
        *(sys.executable, "-m", "celery", "-A", "auditportal", "worker", "--loglevel=WARNING"),
        *("--concurrency=1", "--without-gossip", "--without-mingle", "--without-heartbeat"),
    ]
    with log.open("wb") as out:
        return subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)


class Pipeline:
    """A serving pipeline posting batches with its monitoring token."""

    def __init__(self, base: str, secret: str) -> None:
        self.base, self.secret = base, secret
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"Token {secret}"
        self.url = f"{base}/api/v1/deployments/{DEPLOYMENT}/-/batches/"
        self.errors: list[str] = []
        self.requested = 0.0  # the last post's request alone: until its 202
        self.trace = ""

    def post_until_judged(self, path: Path, batch_id: str, *, labels_later: bool) -> dict[str, Any]:
        fields = {"batch_id": batch_id, "score": "score", "threshold": "0.5", "label": "label"}
        if labels_later:
            fields["row_key"] = "id"
        started = time.perf_counter()
        with path.open("rb") as handle:
            response = self.http.post(self.url, data=fields, files={"file": (path.name, handle)}, timeout=WAIT)
        if response.status_code != 202:
            raise SystemExit(f"the post answered {response.status_code}: {response.text[:2000]}")
        self.requested = time.perf_counter() - started
        location = self.base + response.headers["Location"]
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            answer = self.http.get(location, timeout=WAIT)
            if answer.status_code != 200:  # e.g. SQLite's "database is locked" while a worker writes
                self.errors.append(f"{answer.status_code} on reading batch {batch_id}")
                time.sleep(POLL)
                continue
            batch: dict[str, Any] = answer.json()
            if batch["state"] == "failed":
                raise SystemExit(f"batch {batch_id} failed: {batch['error']}")
            # Counted with its look: the batch row and its look are read by two queries, so a read
            # between them may see the look of a commit that the batch row (read first) predates.
            if batch["state"] == "counted" and batch["look"] is not None:
                if batch["look"]["breached"]:
                    raise SystemExit(f"batch {batch_id} breached a limit: the bench's data should not")
                return batch
            time.sleep(POLL)
        raise SystemExit(f"batch {batch_id} was not judged within {WAIT:.0f} s")


def warm_up(pipeline: Pipeline, path: Path) -> None:
    """Small batches posted at once, several per gunicorn worker, so that each worker has paid its
    first-call costs (imports, the broker's connection) before a timed post may land on it."""
    from concurrent.futures import ThreadPoolExecutor

    def post(index: int) -> None:
        Pipeline(pipeline.base, pipeline.secret).post_until_judged(path, f"warm-up-{index}", labels_later=False)

    with ThreadPoolExecutor(max_workers=WORKERS * 2) as pool:
        list(pool.map(post, range(WORKERS * 4)))


def read_command(path: Path) -> list[str]:
    if path.suffix == ".csv":
        return [sys.executable, "-c", f"import pyarrow.csv as c; c.read_csv({str(path)!r})"]
    return [sys.executable, "-c", f"import pyarrow.parquet as p; p.read_table({str(path)!r})"]


def timed_read(path: Path) -> float:
    started = time.perf_counter()
    subprocess.run(read_command(path), cwd=REPO, check=True)
    return time.perf_counter() - started


def timed_post(pipeline: Pipeline, path: Path, batch_id: str, *, labels_later: bool) -> tuple[float, dict[str, Any]]:
    started, clock = time.perf_counter(), time.time()
    batch = pipeline.post_until_judged(path, batch_id, labels_later=labels_later)
    elapsed = time.perf_counter() - started
    # Where the time went, by the server's clock (the same machine): the batch row written at the end
    # of the request, the look written at the end of the worker's transaction, then the poll that read it.
    received = datetime.fromisoformat(batch["received_at"]).timestamp() - clock
    judged = datetime.fromisoformat(batch["look"]["created_at"]).timestamp() - clock
    pipeline.trace = f"batch row +{received:.2f} s, look +{judged:.2f} s, read +{elapsed:.2f} s"
    return elapsed, batch


def measure(pipeline: Pipeline, directory: Path, rows: int, pairs: int, only: list[str] | None) -> dict[str, float]:
    medians = {}
    for name, file_format, later in VARIANTS:
        if only and name not in only:
            continue
        path = file_of(directory, name, file_format)
        print(f"{name}: {path.stat().st_size / 2**20:.1f} MiB")
        timed_read(path)  # untimed: the page cache, alike for both sides
        ratios = []
        posts, reads, requests_s = [], [], []
        for pair in range(pairs):
            timings: dict[str, float] = {}
            for side in ("read", "post")[:: 1 if pair % 2 == 0 else -1]:
                if side == "read":
                    timings["read"] = timed_read(path)
                else:
                    batch_id = f"{name.replace(', ', '-').replace(' ', '-')}-{pair}"
                    timings["post"], batch = timed_post(pipeline, path, batch_id, labels_later=later)
                    if batch["rows"] != rows or (later and batch["pending_rows"] != rows):
                        raise SystemExit(f"batch {batch_id}: {batch['rows']} rows, {batch['pending_rows']} pending")
            requests_s.append(pipeline.requested)
            posts.append(timings["post"])
            reads.append(timings["read"])
            ratios.append(timings["post"] / timings["read"])
            print(
                f"  post until judged {timings['post']:6.2f} s (request {pipeline.requested:4.2f} s)   "
                f"pyarrow read (whole process) {timings['read']:5.2f} s   ratio {ratios[-1]:.2f}x   [{pipeline.trace}]"
            )
        medians[name] = statistics.median(ratios)
        print(
            f"  {name}: median of {pairs} pairs {medians[name]:.2f}x (post {statistics.median(posts):.2f} s, "
            f"read {statistics.median(reads):.2f} s, request {statistics.median(requests_s):.2f} s)"
        )
    return medians


def page_part() -> None:
    path = Path(__file__).with_name("monitoring_page.py")
    if not path.exists():
        print("the deployment page with 8,760 batches: not measured, bench/monitoring_page.py does not exist yet")
        return
    importlib.import_module("monitoring_page").main()  # bench/ is on sys.path (python bench/monitoring.py)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--database-url", help="default: SQLite in the temporary PORTAL_VAR_DIR")
    parser.add_argument("--broker-url", help="default: kombu's filesystem transport in the PORTAL_VAR_DIR")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument("--dir", type=Path, help="where to write the files (default: a temporary directory)")
    parser.add_argument("--skip-page", action="store_true")
    parser.add_argument(
        "--only", action="append", choices=[name for name, _, _ in VARIANTS], help="measure this file only (repeatable)"
    )
    args = parser.parse_args()

    directory = args.dir or Path(tempfile.mkdtemp(prefix="monitoring-bench-"))
    directory.mkdir(parents=True, exist_ok=True)
    var_dir = Path(tempfile.mkdtemp(prefix="monitoring-bench-var-"))
    server = worker = None
    try:
        started = time.perf_counter()
        in_child("generating the files", _generate, str(directory), args.rows)
        print(f"generated {len(VARIANTS)} files of {args.rows:,} rows in {time.perf_counter() - started:.1f} s")
        if args.database_url:
            fresh_database(args.database_url)
        env = server_env(var_dir, args.database_url)
        env["DJANGO_SETTINGS_MODULE"] = "auditportal.settings.base"
        if args.broker_url:
            env["CELERY_BROKER_URL"] = args.broker_url
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "compileall", "-q", "auditportal"], cwd=REPO, check=True)
        for command in (["migrate", "-v", "0"], ["collectstatic", "--noinput", "-v", "0"]):
            subprocess.run([sys.executable, "manage.py", *command], cwd=REPO, env=env, check=True)
        secret = in_child("seeding", _seed_child, env)
        print(f"migrated and seeded in {time.perf_counter() - started:.1f} s")
        port = free_port()
        server = start_server(env, port, var_dir / "server.log")
        worker = start_worker(env, var_dir / "worker.log")
        pipeline = Pipeline(f"http://127.0.0.1:{port}", secret)
        started = time.perf_counter()
        warm_up(pipeline, directory / "warm-up.csv")
        print(f"warm-up batches judged in {time.perf_counter() - started:.1f} s (the worker's start included)")
        medians = measure(pipeline, directory, args.rows, args.pairs, args.only)
        if pipeline.errors:
            print(f"reading a batch while it was counted failed {len(pipeline.errors)} times: {pipeline.errors[:3]}")
        for name, ratio in medians.items():
            print(
                f"{name}: post until judged / pyarrow read, median {ratio:.2f}x; target <= {TARGET:.0f}x: "
                f"{'PASS' if ratio <= TARGET else 'MISSED'}"
            )
    finally:
        for process in (worker, server):
            if process is not None:
                process.terminate()
                process.wait(timeout=60)
        if args.keep:
            print(f"kept {directory} and {var_dir}")
        else:
            shutil.rmtree(var_dir, ignore_errors=True)
        if not args.keep and args.dir is None:
            shutil.rmtree(directory, ignore_errors=True)
    if not args.skip_page:
        page_part()


if __name__ == "__main__":
    main()
