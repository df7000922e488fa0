"""Attributions of a trainer checkpoint: ``python -m trainer.attribute`` and the portal's summary.

    .venv/bin/python bench/attributions.py [--rows 10000] [--numeric 16] [--categorical 4]
                                           [--repeats 3] [--compare] [--compare-rows 1000]

Generates a dataset with ``--numeric`` + ``--categorical`` features (tests/trainer/trainer_testkit.py
``make_proxy_frame``: one feature is gender's proxy) large enough for ``--rows`` validation rows,
trains a checkpoint on it with the trainer (Determined's local mode), then times, per repeat, the
whole ``python -m trainer.attribute --sample-size ROWS`` process (start-up, shards, Integrated
Gradients, the npz) and ``fairness.statistics.attributions.summarise`` on its file (200 bootstrap
replicates). Target (issue 31): the whole task within 30 s on this machine's 2 cores. On a shared
machine wall times stretch with the load (printed); the command's CPU time (it uses 2 threads) is
the steadier figure.

``--compare`` also times, on ``--compare-rows`` rows of the same model, Captum's IG as
trainer.attribute runs it, a hand-written IG with the same rule and steps, and, when ``shap`` can be
imported (it is not a dependency: e.g. ``pip install --target /tmp/shaplib shap numba llvmlite
slicer`` and ``PYTHONPATH=/tmp/shaplib``), SHAP's DeepExplainer with 100 background rows.
"""

from __future__ import annotations

import argparse
import json
import math
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

HP: dict[str, Any] = {"global_batch_size": 128, "dropout": 0.0, "seed": 3}


def _train(work: Path, rows: int, numeric: int, categorical: int) -> tuple[Path, Path]:
    from tests.trainer.trainer_testkit import make_proxy_frame, run_trainer, stratified_assignment, write_shard_dir

    total = math.ceil(rows / 0.2 * 1.1)  # val_fraction 0.2, and a margin for the hash split
    frame, num, cat = make_proxy_frame(total, seed=0, numeric=numeric, categorical=categorical)
    shards = write_shard_dir(frame, work / "shards", stratified_assignment(frame, 2), numeric=num, categorical=cat)
    run_trainer(work / "run", shards, HP, batches=200, validation_period=200, timeout=600)
    (checkpoint,) = (work / "run" / "xdg" / "determined").iterdir()
    return shards, checkpoint


def _compare(shards: Path, checkpoint: Path, rows: int) -> None:
    import numpy as np
    import torch

    from trainer import attribute
    from trainer.checkpoint import load_model, validation_rows
    from trainer.hparams import resolve_hparams

    torch.set_num_threads(2)
    hp = resolve_hparams(HP)
    spec, all_rows, val = validation_rows(shards, hp)
    model = load_model(checkpoint, spec, hp)
    baseline = attribute._baseline(model, spec, all_rows)
    sub = val.subset(np.arange(min(rows, len(val))))
    x = attribute._input_layer(model, sub.numeric, sub.categorical)
    probability = attribute._Probability(model).double().eval()

    start = time.perf_counter()
    attribute.integrated_gradients(model, spec, sub, baseline)
    print(f"captum IG as trainer.attribute runs it: {time.perf_counter() - start:.2f} s for {len(sub)} rows")

    steps = attribute.IG_STEPS[0]
    alphas = ((torch.arange(steps, dtype=torch.float64) + 0.5) / steps).view(steps, 1, 1)
    start = time.perf_counter()
    for i in range(0, len(x), attribute.ROWS_PER_CHUNK):
        chunk = x[i : i + attribute.ROWS_PER_CHUNK]
        path = (baseline + alphas * (chunk - baseline)).reshape(-1, x.shape[1]).requires_grad_(True)
        (grad,) = torch.autograd.grad(probability(path).sum(), path)
        _ = (chunk - baseline) * grad.view(steps, len(chunk), -1).mean(0)
    print(f"hand-written IG, {steps} midpoint steps: {time.perf_counter() - start:.2f} s for {len(sub)} rows")

    try:
        import shap  # type: ignore[import-not-found]
    except ImportError:
        print("shap is not importable: SHAP not measured")
        return

    class Column(torch.nn.Module):
        def forward(self, z: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = probability(z).unsqueeze(1)
            return out

    background = x[torch.randperm(len(x), generator=torch.Generator().manual_seed(0))[:100]]
    explainer = shap.DeepExplainer(Column().double().eval(), background)
    some = min(200, len(x))
    start = time.perf_counter()
    explainer.shap_values(x[:some], check_additivity=False)
    per = (time.perf_counter() - start) * len(sub) / some
    print(f"shap {shap.__version__} DeepExplainer, 100 background rows: {per:.2f} s for {len(sub)} rows (from {some})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000, help="validation rows sampled and explained")
    parser.add_argument("--numeric", type=int, default=16)
    parser.add_argument("--categorical", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compare", action="store_true")
    parser.add_argument("--compare-rows", type=int, default=1000)
    parser.add_argument("--keep", action="store_true", help="keep the generated shards, checkpoint and files")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-attributions-"))
    start = time.perf_counter()
    shards, checkpoint = _train(work, args.rows, args.numeric, args.categorical)
    print(f"trained a checkpoint in {time.perf_counter() - start:.1f} s")

    import numpy as np

    from auditportal.fairness.statistics.attributions import summarise

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    attributing, summarising, cpu = [], [], []
    for repeat in range(args.repeats):
        out = work / f"attributions-{repeat}.npz"
        command = [sys.executable, "-m", "trainer.attribute", "--data", str(shards), "--checkpoint", str(checkpoint)]
        command += ["--hparams", json.dumps(HP), "--sample-size", str(args.rows), "--seed", "1", "--out", str(out)]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, env=env, check=True)
        attributing.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        start = time.perf_counter()
        with np.load(out, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
        document = summarise(arrays, seed=1)
        summarising.append(time.perf_counter() - start)
    n, features = arrays["attributions"].shape
    steps = np.unique(arrays["steps"], return_counts=True)
    print(f"{n} rows x {features} features; completeness max error {document['completeness']['max_error']:.2e}")
    print("rows per IG step count: " + ", ".join(f"{s}: {c}" for s, c in zip(*steps, strict=True)))
    print(f"python -m trainer.attribute: {_describe(attributing)}; CPU time (user + system) {_describe(cpu)}")
    print(f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"summarise: {_describe(summarising)}")
    whole = [a + s for a, s in zip(attributing, summarising, strict=True)]
    print(f"together: {_describe(whole)} (target 30 s)")
    if args.compare:
        _compare(shards, checkpoint, args.compare_rows)
    if args.keep:
        print(f"kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _describe(times: list[float]) -> str:
    return f"fastest {min(times):.1f} s, median {statistics.median(times):.1f} s over {len(times)}"


if __name__ == "__main__":
    sys.exit(main())
