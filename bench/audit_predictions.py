"""Time prediction audits against a bare pyarrow read, and the statistics against fairlearn.

    .venv/bin/python bench/audit_predictions.py [--rows 10000000] [--pairs 7] [--repeat 3] [--runs 4]
        [--keep] [--dir DIR] [--skip-fairlearn]

1. The judged target: ``manage.py audit_predictions`` as a CI pipeline calls it, a whole process
   (``.venv/bin/python manage.py audit_predictions FILE --label label --score score --threshold 0.5
   --attribute group --format json --fail-on FAIL``, stdout to /dev/null, the production settings
   with a migrated SQLite database in a temporary PORTAL_VAR_DIR) against a whole ``python -c``
   process that reads the same file with ``pyarrow.csv.read_csv``, on a generated CSV (label,
   score, group; 6 groups and some unknown values), the portal's modules compiled to bytecode first as
   in the production image. ``--pairs`` pairs run one after the other, the
   order alternating, after one untimed run of each; the target, <= 1.5x, is checked on the median
   of the per-pair ratios: the two halves of a pair run a second apart, so the swings of this shared
   machine (a factor of two between minutes) mostly cancel. Each process's CPU time (user + system,
   all threads) is printed beside it, for information: the wall-clock ratio cannot go below the CPU
   ratio times the cores the read keeps busy over the machine's cores, whatever runs side by side.
2. For information, the same in-process: Django set up, the database migrated, and a 2,000-row
   file of the same shape and then the big file itself audited and read once before the clock
   starts, as in a running portal worker. Each of ``--repeat`` fresh children times ``--runs``
   pairs (read, then audit, or the other way round, alternating), and also the audit as the web form
   and the API run it once an upload is in (the service with the file's SHA-256 already taken while
   the upload streamed in), and where the audit's CPU time goes. ``--repeat 0`` skips this part.
3. The statistics on the same arrays (one bincount, rates with intervals, all comparisons with
   tests and sample sizes) against fairlearn's MetricFrame computing the per-group rates and
   their spreads. Target: >= 300x faster.

Each child process starts fresh, so none profits from another's warm-up.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchkit import in_child, remove_generated

REPO = Path(__file__).resolve().parents[1]
READ_TARGET = 1.5
STATS_TARGET = 300.0
GROUPS = ("group_a", "group_b", "group_c", "group_d", "group_e", "group_f")
COMMAND_ARGS = ["--label", "label", "--score", "score", "--threshold", "0.5", "--attribute", "group"]
FAIL_ON_EXIT_STATUS = 3  # what audit_predictions --fail-on exits with when the verdict is that bad


def generate(path: Path, rows: int, seed: int = 20260502) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv

    rng = np.random.default_rng(seed)
    shares = np.array([0.35, 0.25, 0.15, 0.12, 0.08, 0.05])
    code = rng.choice(len(GROUPS), size=rows, p=shares)
    label = (rng.random(rows) < 0.3 + 0.03 * code).astype(np.int8)
    score = np.clip(rng.normal(0.35 + 0.3 * label - 0.01 * code, 0.2), 0, 1).round(4)
    names = np.array(GROUPS, dtype=object)[code]
    unknown = rng.random(rows) < 0.02
    names[unknown] = "unknown"
    table = pa.table({"label": pa.array(label), "score": pa.array(score), "group": pa.array(names, pa.string())})
    pacsv.write_csv(table, path, write_options=pacsv.WriteOptions(quoting_style="needed"))


def _generate(path: Path, rows: int, queue: Any) -> None:
    generate(path, rows)
    queue.put(None)


def _django(var_dir: str) -> None:
    sys.path.insert(0, str(REPO))
    os.environ["DJANGO_SETTINGS_MODULE"] = "auditportal.settings.test"
    os.environ["PORTAL_VAR_DIR"] = var_dir
    import django

    django.setup()


def _measure_pairs(path: str, var_dir: str, runs: int, queue: Any) -> None:
    """Time the read and the audit of the same file in pairs, in one process, in alternating order."""
    import pyarrow.csv as pacsv

    # Both sides first handle a small file of the same shape, then one untimed pair on the big file,
    # as a long-running portal worker that has audited files before: first-call costs (imports of
    # the command and its services, pyarrow's thread pools, and faulting in the memory a
    # 10-million-row table needs) are paid before the clock starts, on both sides alike.
    small = Path(var_dir) / "warm-up.csv"
    if not small.exists():
        generate(small, 2_000)
    _django(var_dir)
    import hashlib
    import json

    from django.core.management import call_command

    from auditportal.accounts.cli import cli_user
    from auditportal.accounts.models import Role
    from auditportal.audits import services
    from auditportal.fairness.statistics.audit import AuditSpec

    sink = open(os.devnull, "w")  # noqa: SIM115
    user = cli_user(None, role=Role.ML_ENGINEER)
    spec = AuditSpec(label="label", score="score", threshold=0.5, attributes=("group",))
    # What the upload handler computes as the bytes arrive (see datasets.uploads).
    received = {target: hashlib.sha256(Path(target).read_bytes()).hexdigest() for target in (str(small), path)}

    def audit(target: str) -> None:
        call_command("audit_predictions", target, *COMMAND_ARGS, "--format", "json", stdout=sink)

    def upload(target: str) -> None:
        stored = services.prediction_audit_run(
            user=user, source=Path(target), original_name="predictions.csv", spec=spec, sha256=received[target]
        )
        sink.write(json.dumps({"id": stored.pk, **stored.result}, allow_nan=False, indent=2))

    def read(target: str) -> None:
        pacsv.read_csv(target)

    sides = (("read", read), ("audit", audit), ("upload", upload))
    for warm_up in (str(small), path):
        for _, function in sides:
            function(warm_up)
    pairs = []
    for run in range(runs):
        timed: dict[str, tuple[float, float]] = {}
        # Alternate the order, so no side always gets another's leftovers.
        for kind, function in sides[:: 1 if run % 2 == 0 else -1]:
            cpu = _cpu_seconds()
            started = time.perf_counter()
            function(path)
            timed[kind] = (time.perf_counter() - started, _cpu_seconds() - cpu)
        pairs.append((timed["read"], timed["audit"], timed["upload"]))
    queue.put((pairs, _breakdown(path, runs)))


def _breakdown(path: str, runs: int) -> dict[str, float]:
    """Median CPU seconds of the audit's parts on their own: the subset read (as the audit parses,
    text attributes dictionary-encoded) with the hash beside it, the SHA-256 of the file alone, and the block
    counting (which codes the text attributes as it counts)."""
    import hashlib

    from auditportal.fairness.files import tabular
    from auditportal.fairness.statistics import counting

    spec = tabular.DatasetSpec(label="label", positive="1", attributes=("group",), features=())
    others = [("score", "score")]

    def sha256() -> None:
        digest = hashlib.sha256()
        buffer = bytearray(1 << 20)
        with open(path, "rb", buffering=0) as handle, memoryview(buffer) as view:
            while count := handle.readinto(view):
                digest.update(view[:count])

    def parse_and_hash() -> Any:
        return tabular.read_columns(
            Path(path),
            spec,
            others=others,
            display_name="p.csv",
            max_bytes=1 << 40,
        )

    table = parse_and_hash().table

    def count() -> None:
        counting.count_blocks(table, spec=spec, output="score", threshold=0.5, intersect=False, display_name="p.csv")

    parts: dict[str, float] = {}
    for name, function in (("parse + hash", parse_and_hash), ("hash", sha256), ("count", count)):
        seconds = []
        for _ in range(runs):
            cpu = _cpu_seconds()
            function()
            seconds.append(_cpu_seconds() - cpu)
        parts[name] = statistics.median(seconds)
    return parts


def _cpu_seconds() -> float:
    """User + system time of this process, all its threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


Timing = tuple[float, float]  # wall seconds, CPU seconds


def measure_pairs(path: Path, var_dir: str, runs: int) -> tuple[list[tuple[Timing, Timing, Timing]], dict[str, float]]:
    """(read, audit, upload) timings per pair, and the audit's CPU breakdown."""
    result: tuple[list[tuple[Timing, Timing, Timing]], dict[str, float]] = in_child(
        "the paired measurement", _measure_pairs, str(path), var_dir, runs
    )
    return result


def compile_portal() -> None:
    """Compile the portal's modules once, as installed: the Dockerfile does it at build time, and pip does it
    for pyarrow's and Django's modules. Without it a shell with PYTHONDONTWRITEBYTECODE=1 (this
    machine's, and the image's) has every audit process compile about 70 modules from source, about
    0.1 s that the pyarrow side never pays. trainer/ too: the portal imports trainer.hparams."""
    sources = ["auditportal", "trainer", "manage.py"]  # the Dockerfile's list
    subprocess.run([sys.executable, "-m", "compileall", "-q", *sources], cwd=REPO, check=True)
    print("the portal's bytecode compiled first (python -m compileall, as the Dockerfile does)")


def process_command(kind: str, path: Path) -> list[str]:
    if kind == "audit":
        return [
            *(sys.executable, "manage.py", "audit_predictions", str(path)),
            *(*COMMAND_ARGS, "--format", "json", "--fail-on", "FAIL"),
        ]
    return [sys.executable, "-c", f"import pyarrow.csv as c; c.read_csv({str(path)!r})"]


def measure_process(kind: str, path: Path, env: dict[str, str]) -> Timing:
    """Wall and CPU (user + system, all threads) seconds of one whole process; the audit exits with 3
    when the verdict is FAIL (--fail-on)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        process_command(kind, path), cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, FAIL_ON_EXIT_STATUS if kind == "audit" else 0):
        raise SystemExit(f"the {kind} process failed with exit code {done.returncode}:\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, cpu


def measure_process_pairs(path: Path, env: dict[str, str], pairs: int) -> list[tuple[Timing, Timing]]:
    """(read, audit) (wall, CPU) seconds of whole processes, pair by pair in alternating order."""
    for kind in ("read", "audit"):  # untimed: the page cache and the database file, alike for both
        measure_process(kind, path, env)
    timed = []
    for pair in range(pairs):
        seconds = {kind: measure_process(kind, path, env) for kind in ("read", "audit")[:: 1 if pair % 2 == 0 else -1]}
        (read, read_cpu), (audit, audit_cpu) = seconds["read"], seconds["audit"]
        timed.append((seconds["read"], seconds["audit"]))
        print(
            f"  process  read {read:5.2f} s ({read_cpu:4.2f} s CPU)   audit {audit:5.2f} s ({audit_cpu:4.2f} s CPU)   "
            f"ratio {audit / read:.2f}x"
        )
    return timed


def _stats(path: str, queue: Any) -> None:
    """Both statistics sides on the same arrays, decoded once from the file."""
    sys.path.insert(0, str(REPO))
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    from auditportal.fairness.statistics import judge, stats

    table = pacsv.read_csv(path)
    y_true = np.asarray(table.column("label").to_numpy(), dtype=np.int8)
    y_pred = np.asarray(pc.greater_equal(table.column("score"), pa.scalar(0.5)).to_numpy(), dtype=np.int8)
    groups = np.asarray(table.column("group").to_numpy(zero_copy_only=False), dtype=object)
    codes = np.full(len(groups), -1, np.int32)
    for index, name in enumerate(GROUPS):
        codes[groups == name] = index
    del table, groups

    def ours() -> dict[str, Any]:
        counts, unknown = stats.confusion_counts(codes, y_true, y_pred, len(GROUPS))
        return judge.judge_attribute(counts, GROUPS, unknown=int(unknown.sum()))

    ours()  # warm-up: the first call pays one-time costs (the statistics module's imports)
    timings = []
    for _ in range(5):
        started = time.perf_counter()
        document = ours()
        timings.append(time.perf_counter() - started)
    ours_seconds = min(timings)

    from fairlearn.metrics import (
        MetricFrame,
        false_negative_rate,
        false_positive_rate,
        selection_rate,
        true_positive_rate,
    )
    from sklearn.metrics import precision_score

    known = codes >= 0
    started = time.perf_counter()
    frame = MetricFrame(
        metrics={
            "tpr": true_positive_rate,
            "fpr": false_positive_rate,
            "fnr": false_negative_rate,
            "ppv": precision_score,
            "selection_rate": selection_rate,
        },
        y_true=y_true[known],
        y_pred=y_pred[known],
        sensitive_features=codes[known],
    )
    frame.difference(method="between_groups")
    fairlearn_seconds = time.perf_counter() - started
    theirs = frame.by_group["tpr"].to_numpy(dtype=float)
    mine = np.array([document["groups"][name]["tpr"] for name in GROUPS])
    assert np.allclose(theirs, mine, atol=1e-12), (theirs, mine)
    queue.put((ours_seconds, fairlearn_seconds))


def measure_stats(path: Path) -> tuple[float, float]:
    result: tuple[float, float] = in_child("the statistics measurement", _stats, str(path))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--pairs", type=int, default=7, help="whole-process pairs (the judged target)")
    parser.add_argument("--repeat", type=int, default=3, help="fresh in-process children (0: none)")
    parser.add_argument("--runs", type=int, default=4, help="timed pairs in each in-process child")
    parser.add_argument("--keep", action="store_true", help="keep the generated CSV file")
    parser.add_argument("--dir", type=Path, help="where to write the CSV (default: a temporary directory)")
    parser.add_argument("--skip-fairlearn", action="store_true")
    args = parser.parse_args()

    directory = args.dir or Path(tempfile.mkdtemp(prefix="audit-bench-"))
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "predictions.csv"
    var_dir = tempfile.mkdtemp(prefix="audit-bench-var-")
    try:
        if not path.exists():
            started = time.perf_counter()
            in_child("generating the CSV", _generate, path, args.rows)
            print(f"generated {args.rows:,} rows in {time.perf_counter() - started:.1f} s: {path}")
        print(f"file: {path.stat().st_size / 2**20:.0f} MiB, {len(GROUPS)} groups")
        # The production settings, as a CI job runs the command (a throw-away key; DEBUG stays off).
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "auditportal.settings.base",
            "SECRET_KEY": "bench-secret-key-not-for-production",
            "REPORT_KEY_PASSPHRASE": "bench-report-key-passphrase-not-for-production",
            "PORTAL_VAR_DIR": var_dir,
        }
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=REPO, env=env, check=True)
        compile_portal()

        if args.repeat > 0:
            in_process(path, var_dir, args.repeat, args.runs)

        process_pairs = measure_process_pairs(path, env, args.pairs)
        ratios = [audit / read for (read, _), (audit, _) in process_pairs]
        process_ratio = statistics.median(ratios)
        print(
            f"audit/pyarrow-read ratio, whole processes: median of {len(ratios)} pairs {process_ratio:.2f}x "
            f"(range {min(ratios):.2f}-{max(ratios):.2f}x; medians: manage.py audit_predictions "
            f"{statistics.median(audit for _, (audit, _) in process_pairs):.2f} s, python -c read "
            f"{statistics.median(read for (read, _), _ in process_pairs):.2f} s)"
        )
        print_cpu(process_pairs)
        print(
            f"target <= {READ_TARGET:.1f}x (whole processes, median of pairs): "
            f"{'PASS' if process_ratio <= READ_TARGET else 'MISSED'}"
        )

        if not args.skip_fairlearn:
            ours, theirs = measure_stats(path)
            speedup = theirs / ours
            print(f"statistics: ours {ours * 1000:.1f} ms, fairlearn MetricFrame {theirs:.2f} s: {speedup:.0f}x faster")
            print(f"target >= {STATS_TARGET:.0f}x: {'PASS' if speedup >= STATS_TARGET else 'MISSED'}")
    finally:
        shutil.rmtree(var_dir, ignore_errors=True)
        remove_generated(path, directory, keep=args.keep, directory_given=args.dir is not None)


def print_cpu(process_pairs: list[tuple[Timing, Timing]]) -> None:
    """For information: the CPU time of the same whole processes. The audit's wall time is at least its
    CPU time over the machine's cores, so the wall-clock ratio cannot go below the CPU ratio times the
    cores the read keeps busy over the machine's cores, whatever the audit runs side by side."""
    read_cpu = statistics.median(cpu for (_, cpu), _ in process_pairs)
    audit_cpu = statistics.median(cpu for _, (_, cpu) in process_pairs)
    cores = len(os.sched_getaffinity(0))
    busy = statistics.median(cpu / wall for (wall, cpu), _ in process_pairs)
    print(
        f"for information, CPU time (user + system, all threads), medians: audit {audit_cpu:.2f} s, read "
        f"{read_cpu:.2f} s ({audit_cpu / read_cpu:.2f}x); the read keeps {busy:.1f} of this machine's {cores} "
        "cores busy"
    )


def in_process(path: Path, var_dir: str, repeat: int, runs: int) -> None:
    """The in-process pairs, for information."""
    ratios: list[float] = []
    upload_ratios: list[float] = []
    cpu_ratios: list[float] = []
    best: dict[str, float] = {}
    parts: dict[str, list[float]] = {}
    read_cpus: list[float] = []
    for _ in range(repeat):
        pairs, breakdown = measure_pairs(path, var_dir, runs)
        for name, seconds in breakdown.items():
            parts.setdefault(name, []).append(seconds)
        for (read_wall, read_cpu), (audit_wall, audit_cpu), (upload_wall, _) in pairs:
            read_cpus.append(read_cpu)
            ratios.append(audit_wall / read_wall)
            upload_ratios.append(upload_wall / read_wall)
            cpu_ratios.append(audit_cpu / read_cpu)
            best["read"] = min(best.get("read", read_wall), read_wall)
            best["audit"] = min(best.get("audit", audit_wall), audit_wall)
            print(
                f"  in-process  read {read_wall:5.2f} s ({read_cpu:4.2f} s CPU)   "
                f"audit {audit_wall:5.2f} s ({audit_cpu:4.2f} s CPU)   ratio {ratios[-1]:.2f}x   "
                f"uploaded file {upload_wall:5.2f} s ({upload_ratios[-1]:.2f}x)"
            )
    print(
        f"for information, audit/pyarrow-read ratio in-process (a running worker): median of {len(ratios)} pairs "
        f"{statistics.median(ratios):.2f}x (range {min(ratios):.2f}-{max(ratios):.2f}x); best against best "
        f"{best['audit'] / best['read']:.2f}x (audit {best['audit']:.2f} s, read {best['read']:.2f} s); "
        f"CPU time ratio, median of pairs {statistics.median(cpu_ratios):.2f}x"
    )
    print(
        "for information, an uploaded file (web form or API; its SHA-256 taken while it streamed in) "
        f"against the same reads: median {statistics.median(upload_ratios):.2f}x "
        f"(range {min(upload_ratios):.2f}-{max(upload_ratios):.2f}x)"
    )
    read_cpu = statistics.median(read_cpus)
    parse = statistics.median(parts["parse + hash"]) - statistics.median(parts["hash"])
    print(
        f"where the audit's CPU time goes (medians, in units of the plain read's {read_cpu:.2f} s): "
        f"parse with the text attribute dictionary-encoded, the hash beside it taken out {parse / read_cpu:.2f}, "
        f"SHA-256 of the file {statistics.median(parts['hash']) / read_cpu:.2f}, "
        f"block counting {statistics.median(parts['count']) / read_cpu:.2f}"
    )


if __name__ == "__main__":
    main()
