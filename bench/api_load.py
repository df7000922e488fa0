"""20 concurrent clients against a real portal process on loopback: no errors, latency, and no
growth in the server's open files or memory.

    .venv/bin/python bench/api_load.py [--clients 20] [--seconds 60] [--warmup 30] [--baseline 15]
        [--port 0] [--database-url URL] [--keep]

The portal runs as the production image runs it (gunicorn, ``auditportal.wsgi``, 3 sync workers,
production settings with DEBUG off and collected static files) on 127.0.0.1, on a fresh SQLite
database in a temporary PORTAL_VAR_DIR (or ``--database-url``, e.g. PostgreSQL, migrated here),
seeded with the demo dataset, an experiment of 4 running trials with 40 validations each (judged,
with verdicts) and one member per client holding the steward, engineer and reviewer roles.

Each client (a thread with its own logged-in session, as a browser has) repeats a mix of what people
do on a busy day, choosing by weight:

- progress poll (50%): ``GET /experiments/<id>/progress.json``, as the page does every 2 s;
- experiment page (20%): ``GET /experiments/<id>/`` then ``figures.json``;
- prediction audit (15%): ``POST /api/v1/audits/predictions/`` with a 5,000-row CSV (upload and
  audit, 201), then its page ``GET /audits/predictions/<id>/``;
- dataset upload (15%): step 1 of registration, ``POST /datasets/new/`` with a 2,000-row CSV (302),
  the declaration page it leads to, and discarding the staged upload (302), so nothing accumulates.

Phases: ``--warmup`` seconds of all clients (every worker has loaded what it loads once), then
``--baseline`` seconds of one client alone (the baseline: the same mix, no contention), then the
server's open files and RSS (the gunicorn master and its workers, from /proc) are read, ``--seconds`` seconds
of all clients are measured (the files and RSS sampled every 10 s), and after 3 s of quiet the files
and RSS are read again.

Printed: requests, errors (any unexpected status, a refused connection or a timeout of 60 s), p50,
p95 and p99 per kind and overall, the ratio of the loaded p95 to the baseline's, and the server's
file descriptors and RSS before and after (and every 10 s). Exit status 1 when any request failed,
the open files grew, or the RSS grew by more than 5% (+ 8 MiB): a leak of one object or file per
request would show as thousands after 60 s. Why any tolerance: an audit's numpy and pyarrow arrays
leave a worker's allocator at a high-water mark that it reaches over its first few dozen audits
(measured in one process on this 5,000-row file: +31 MiB after 50 audits, +37 MiB after 200, with
tracemalloc showing no Python object kept per request), and the three workers get there at their own
pace.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from benchkit import ensure_database, in_child

REPO = Path(__file__).resolve().parents[1]
WORKERS = 3  # as the Dockerfile's CMD
TIMEOUT = 60.0
RSS_TOLERANCE = 0.05
RSS_SLACK = 8 * 1024**2
PASSWORD = "bench-load-password-not-for-production"  # noqa: S105 (throw-away accounts)


# ------------------------------------------------------------------------------------ the server


def server_env(var_dir: Path, database_url: str | None) -> dict[str, str]:
    env = {
        **os.environ,
        "DEBUG": "false",
        "SECRET_KEY": "bench-secret-key-not-for-production",
        "REPORT_KEY_PASSPHRASE": "bench-report-key-passphrase-not-for-production",
        "PORTAL_VAR_DIR": str(var_dir),
        "DATABASE_URL": database_url or f"sqlite:///{var_dir / 'portal.sqlite3'}",
        "ALLOWED_HOSTS": "127.0.0.1",
        "LOG_LEVEL": "WARNING",
        # Plain HTTP on loopback, where a deployment has its TLS-terminating proxy: with DEBUG off the
        # portal otherwise redirects every request to https:// and marks its cookies Secure, which a
        # client sends over HTTPS only (settings/security.py).
        "SECURE_SSL_REDIRECT": "false",
        "SECURE_COOKIES": "false",
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return env


def seed(clients: int) -> dict[str, Any]:
    """In a child with Django set up: the demo dataset, a running experiment with judged trials, and
    one session per client. Returns the ids and the session keys."""
    sys.path.insert(0, str(REPO))
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "auditportal.settings.base")
    django.setup()
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore
    from django.core.management import call_command

    from auditportal.accounts.models import Role, RoleGrant, User
    from auditportal.datasets.models import DatasetVersion
    from auditportal.experiments import configs
    from auditportal.experiments.ingest import trial_metrics_ingest
    from auditportal.experiments.models import Backend, Experiment, ExperimentStatus, Template, Trial, TrialState
    from auditportal.fairness.files.metricsfile import MetricRecord

    call_command("make_demo_dataset", "--if-missing", verbosity=0)
    version = DatasetVersion.objects.order_by("pk").first()
    assert version is not None
    engineer, _ = User.objects.get_or_create(username="bench-engineer")
    space = configs.space_build(Template.ASHA, None)
    experiment = Experiment.objects.create(
        dataset_version=version,
        launched_by=engineer,
        name="bench-load",
        template=Template.ASHA,
        backend=Backend.LOCAL,
        batches=400,
        max_trials=4,
        hparam_space=space,
        validation_period=10,
        shard_dir=str(version.pk),
        config_yaml="name: bench-load\n",
        status=ExperimentStatus.RUNNING,
    )
    rng = random.Random(7)
    for number, hparams in enumerate(configs.sample(space, 4, seed=experiment.pk), start=1):
        trial = Trial.objects.create(
            experiment=experiment, number=number, hparams=hparams, steps_planned=400, state=TrialState.RUNNING
        )
        records = []
        for step in range(10, 410, 10):
            metrics: dict[str, float | None] = {"count/gender/unknown": 3.0, "accuracy": 0.8, "eod": 0.0}
            for group, size in (("female", 400), ("male", 600)):
                tp = float(int(size * (0.6 + rng.random() * 0.2)))
                metrics |= {f"count/gender/{group}/tp": tp, f"count/gender/{group}/fn": size - tp}
                metrics |= {f"count/gender/{group}/fp": 40.0, f"count/gender/{group}/tn": 560.0}
            records.append(MetricRecord(kind="validation", step=step, metrics=metrics))
        trial_metrics_ingest(trial=trial, records=records)
    sessions = []
    for index in range(clients + 1):
        user, _ = User.objects.get_or_create(username=f"load{index:02d}")
        user.set_password(PASSWORD)
        user.save()
        for role in (Role.DATA_STEWARD, Role.ML_ENGINEER, Role.REVIEWER):
            RoleGrant.objects.get_or_create(user=user, role=role)
        store = SessionStore()
        store[SESSION_KEY] = str(user.pk)
        store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        store[HASH_SESSION_KEY] = user.get_session_auth_hash()
        store.create()
        sessions.append(store.session_key)
    return {"experiment": experiment.pk, "sessions": sessions}


def _seed_child(clients: int, queue: Any) -> None:
    queue.put(seed(clients))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start_server(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        "auditportal.wsgi",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(WORKERS),
        "--timeout",
        "300",
    ]
    with log.open("wb") as out:
        server = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"gunicorn exited with {server.returncode}; see {log}")
        try:
            if requests.get(f"http://127.0.0.1:{port}/login/", timeout=30).status_code == 200:
                return server
        except requests.RequestException:
            time.sleep(0.3)
    server.terminate()
    server.wait(timeout=30)
    raise SystemExit(f"gunicorn did not answer within 60 s; see {log}")


@dataclass(frozen=True)
class Footprint:
    processes: int
    fds: int
    rss: int


def footprint(master: int) -> Footprint:
    """Open files and resident memory of the gunicorn master and its workers."""
    pids = [master] + [int(p) for p in Path(f"/proc/{master}/task/{master}/children").read_text().split()]
    fds = sum(len(os.listdir(f"/proc/{pid}/fd")) for pid in pids)
    rss = 0
    for pid in pids:
        match = re.search(r"^VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), flags=re.M)
        assert match is not None
        rss += int(match.group(1)) * 1024
    return Footprint(processes=len(pids), fds=fds, rss=rss)


# ----------------------------------------------------------------------------------- the clients


def predictions_csv(rows: int, seed: int) -> bytes:
    rng = random.Random(seed)
    out = io.StringIO()
    out.write("label,score,gender,age_group\n")
    for _ in range(rows):
        gender = rng.choice(("female", "male", "unknown"))
        label = int(rng.random() < 0.4)
        score = min(1.0, max(0.0, rng.gauss(0.6 if label else 0.35, 0.2)))
        out.write(f"{label},{score:.4f},{gender},{rng.choice(('young', 'middle', 'old'))}\n")
    return out.getvalue().encode()


def dataset_csv(rows: int, seed: int) -> bytes:
    rng = random.Random(seed)
    out = io.StringIO()
    out.write("income,age,gender,approved\n")
    for _ in range(rows):
        out.write(f"{rng.randint(1000, 9000)},{rng.randint(18, 80)},{rng.choice(('f', 'm'))},{rng.randint(0, 1)}\n")
    return out.getvalue().encode()


@dataclass
class Results:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, kind: str, seconds: float, error: str | None) -> None:
        with self.lock:
            self.latencies[kind].append(seconds)
            if error:
                self.errors.append(f"{kind}: {error}")

    def count(self) -> int:
        return sum(len(values) for values in self.latencies.values())


class Client:
    def __init__(self, base: str, session_key: str, experiment: int, seed: int) -> None:
        self.base = base
        self.experiment = experiment
        self.http = requests.Session()
        self.http.cookies.set("sessionid", session_key, domain="127.0.0.1")
        self.rng = random.Random(seed)
        self.predictions = predictions_csv(5000, seed)
        self.dataset = dataset_csv(2000, seed)
        self.http.get(f"{base}/", timeout=TIMEOUT)  # the CSRF cookie, as a browser gets it
        self.csrf = self.http.cookies.get("csrftoken", domain="127.0.0.1") or ""
        self.actions: list[tuple[str, int, Callable[[Results], None]]] = [
            ("progress poll", 50, self.poll),
            ("experiment page", 20, self.experiment_page),
            ("prediction audit", 15, self.audit),
            ("dataset upload", 15, self.upload),
        ]

    def request(self, results: Results, kind: str, method: str, path: str, expect: int, **kwargs: Any) -> Any:
        headers = {"X-CSRFToken": self.csrf, "Referer": f"{self.base}/"} if method == "POST" else {}
        started = time.perf_counter()
        error = None
        response = None
        try:
            response = self.http.request(
                method, self.base + path, headers=headers, allow_redirects=False, timeout=TIMEOUT, **kwargs
            )
            if response.status_code != expect:
                error = f"{method} {path}: {response.status_code} (expected {expect}) {response.text[:200]!r}"
        except requests.RequestException as exc:
            error = f"{method} {path}: {type(exc).__name__}: {exc}"
        results.record(kind, time.perf_counter() - started, error)
        return None if error else response

    def poll(self, results: Results) -> None:
        self.request(results, "progress poll", "GET", f"/experiments/{self.experiment}/progress.json", 200)

    def experiment_page(self, results: Results) -> None:
        if self.request(results, "experiment page", "GET", f"/experiments/{self.experiment}/", 200):
            self.request(results, "experiment figures", "GET", f"/experiments/{self.experiment}/figures.json", 200)

    def audit(self, results: Results) -> None:
        data = {"label": "label", "score": "score", "threshold": "0.5", "attributes": ["gender", "age_group"]}
        files = {"file": ("scores.csv", self.predictions, "text/csv")}
        created = self.request(
            results, "prediction audit", "POST", "/api/v1/audits/predictions/", 201, data=data, files=files
        )
        if created is not None:
            self.request(results, "audit page", "GET", f"/audits/predictions/{created.json()['id']}/", 200)

    def upload(self, results: Results) -> None:
        name = f"bench-{self.rng.randrange(10**9)}"
        files = {"file": (f"{name}.csv", self.dataset, "text/csv")}
        staged = self.request(
            results, "dataset upload", "POST", "/datasets/new/", 302, data={"name": name}, files=files
        )
        if staged is None:
            return
        declare = staged.headers["Location"]
        if self.request(results, "declaration page", "GET", declare, 200):
            self.request(results, "discard upload", "POST", f"{declare}discard/", 302)

    def run(self, results: Results, until: float) -> None:
        weights = [weight for _, weight, _ in self.actions]
        while time.monotonic() < until:
            _, _, action = self.rng.choices(self.actions, weights=weights)[0]
            action(results)


def load(clients: list[Client], seconds: float, sample: Callable[[], None] | None = None) -> Results:
    """All ``clients`` for ``seconds``; ``sample`` is called every 10 s meanwhile."""
    results = Results()
    until = time.monotonic() + seconds
    threads = [threading.Thread(target=client.run, args=(results, until)) for client in clients]
    for thread in threads:
        thread.start()
    while sample is not None and time.monotonic() + 10 < until:
        time.sleep(10)
        sample()
    for thread in threads:
        thread.join()
    return results


def percentile(values: list[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def report(title: str, results: Results, seconds: float) -> float:
    everything = [value for values in results.latencies.values() for value in values]
    print(
        f"\n{title}: {len(everything):,} requests in {seconds:.0f} s ({len(everything) / seconds:.1f}/s), "
        f"{len(results.errors)} errors"
    )
    print(f"  {'':22} {'requests':>9} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    for kind in sorted(results.latencies):
        values = results.latencies[kind]
        print(
            f"  {kind:22} {len(values):9,} {percentile(values, 50) * 1e3:8.0f} "
            f"{percentile(values, 95) * 1e3:8.0f} {percentile(values, 99) * 1e3:8.0f}"
        )
    p95 = percentile(everything, 95)
    print(
        f"  {'all':22} {len(everything):9,} {percentile(everything, 50) * 1e3:8.0f} {p95 * 1e3:8.0f} "
        f"{percentile(everything, 99) * 1e3:8.0f}"
    )
    for error in results.errors[:10]:
        print(f"  error: {error}")
    return p95


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--warmup", type=float, default=30)
    parser.add_argument("--baseline", type=float, default=15)
    parser.add_argument("--port", type=int, default=0, help="0: any free port on 127.0.0.1")
    parser.add_argument("--database-url", help="default: SQLite in the temporary var directory")
    parser.add_argument("--keep", action="store_true", help="keep the temporary var directory")
    args = parser.parse_args()

    var_dir = Path(tempfile.mkdtemp(prefix="bench-api-load-"))
    env = server_env(var_dir, args.database_url)
    if args.database_url and args.database_url.startswith("postgres"):
        ensure_database(args.database_url)
    print(f"== setting up in {var_dir}")
    subprocess.run([sys.executable, "-m", "compileall", "-q", "auditportal"], cwd=REPO, check=True)
    for command in (["migrate", "-v", "0"], ["collectstatic", "--noinput", "-v", "0"]):
        subprocess.run([sys.executable, "manage.py", *command], cwd=REPO, env=env, check=True)
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        seeded = in_child("seeding", _seed_child, args.clients)
    finally:
        os.environ.clear()
        os.environ.update(saved)

    port = args.port or free_port()
    base = f"http://127.0.0.1:{port}"
    status = 0
    server = None
    try:
        server = start_server(env, port, var_dir / "gunicorn.log")
        print(f"== gunicorn (pid {server.pid}, {WORKERS} sync workers) on {base}; {args.clients} clients")
        sessions = seeded["sessions"]
        clients = [Client(base, sessions[i], seeded["experiment"], seed=i) for i in range(args.clients)]
        warm = load(clients, args.warmup)
        print(
            f"\nwarm-up, {args.clients} clients: {warm.count():,} requests in {args.warmup:.0f} s, "
            f"{len(warm.errors)} errors"
        )
        alone = [Client(base, sessions[-1], seeded["experiment"], seed=1000)]
        baseline_results = load(alone, args.baseline)
        baseline = report("baseline, 1 client", baseline_results, args.baseline)
        before = footprint(server.pid)
        samples = [before]
        results = load(clients, args.seconds, sample=lambda: samples.append(footprint(server.pid)))
        time.sleep(3)
        after = footprint(server.pid)
        samples.append(after)
        p95 = report(f"{args.clients} clients", results, args.seconds)
        print(
            f"\np95 with {args.clients} clients / p95 of 1 client: {p95 / baseline:.1f}x "
            f"({p95 * 1e3:.0f} ms / {baseline * 1e3:.0f} ms)"
        )
        grew = after.rss - before.rss
        print(
            f"server ({after.processes} processes): open files {before.fds} -> {after.fds}, "
            f"RSS {before.rss / 2**20:.1f} -> {after.rss / 2**20:.1f} MiB ({grew / 2**20:+.1f} MiB, "
            f"{grew / before.rss:+.1%})"
        )
        failures = []
        failed = len(warm.errors) + len(baseline_results.errors) + len(results.errors)
        if failed:
            failures.append(f"{failed} requests failed")
        if after.processes != before.processes:
            failures.append(f"the server had {before.processes} processes and then {after.processes}")
        if after.fds > before.fds:
            failures.append(f"open files grew by {after.fds - before.fds}")
        if grew > before.rss * RSS_TOLERANCE + RSS_SLACK:
            failures.append(f"RSS grew by {grew / 2**20:.1f} MiB")
        print(
            "  every 10 s: RSS "
            + ", ".join(f"{f.rss / 2**20:.0f}" for f in samples)
            + " MiB; open files "
            + ", ".join(str(f.fds) for f in samples)
        )
        for failure in failures:
            print(f"FAIL: {failure}")
        status = 1 if failures else 0
        if not failures:
            print("OK: 0 errors, no growth in open files or memory")
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
        if args.keep:
            print(f"kept {var_dir}")
        else:
            shutil.rmtree(var_dir, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
