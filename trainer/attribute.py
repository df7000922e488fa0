"""Per-row feature attributions of a trained checkpoint on a stratified sample of its validation rows.

    python -m trainer.attribute --data SHARDS --checkpoint DIR --hparams JSON --sample-size N --seed S --out FILE.npz

Same ``--data``/``--checkpoint``/``--hparams`` as :mod:`trainer.predict`: the validation rows are the ones
training held out (:func:`trainer.data.validation_mask` with the trial's ``val_fraction``). At most N of
them are drawn, stratified by every monitored attribute's group (seeded by S), and explained with
Integrated Gradients (Sundararajan et al. 2017) of the positive class's probability. The npz layout
is trainer/README.md's "Attributions file"; exit status 2 and one line on stderr on bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from trainer.checkpoint import load_model, monitored_attributes, validation_rows
from trainer.data import EncodedRows, ShardError, ShardSpec
from trainer.hparams import HparamError, resolve_hparams
from trainer.model import TabularMLP

ATTRIBUTIONS_SCHEMA = 1
# Quadrature points per row, then for the rows still beyond TOLERANCE (see integrated_gradients).
IG_STEPS = (64, 256, 1024)
IG_METHOD = "riemann_middle"
TOLERANCE = 1e-3
# Rows explained per Captum call at IG_STEPS[0] points (fewer at more): ROWS_PER_CHUNK * IG_STEPS[0]
# copies of the input layer go through the model at once.
ROWS_PER_CHUNK = 1024
MIN_FLOOR = 30
PROXY_ROWS = 50_000
BASELINE_KIND = (
    "numeric inputs at the dataset's mean (0 after standardising), each categorical's embedding at "
    "its mean over the dataset's rows"
)


def stratified_sample(codes: np.ndarray, group_counts: list[int], size: int, seed: int) -> np.ndarray:
    """Sorted indices of at most ``size`` rows, every group of every attribute represented.

    ``codes`` is [n, S] (one column per monitored attribute, unknown = that attribute's group count).
    Each group is kept whole up to a floor of ``min(group size, max(30, size // (4 * groups)))`` rows
    (``groups``: all attributes' groups together; when the floors could not fit in ``size`` the floor
    is ``size // groups``); the rest of the sample is drawn uniformly from the remaining rows.
    Deterministic in ``seed``. Rows that share every code are exchangeable: the sample is uniform
    within each such cell, which is what :func:`cell_weights` relies on.
    """
    n = codes.shape[0]
    if size < 1:
        raise ValueError("the sample size must be at least 1")
    if n <= size:
        return np.arange(n)
    n_groups = sum(group_counts)
    floor = max(MIN_FLOOR, size // (4 * max(1, n_groups)))
    if n_groups and floor * n_groups > size:
        floor = size // n_groups
    if n_groups and floor < 1:
        raise ValueError(
            f"a sample of {size} rows cannot hold one row of each of the {n_groups} groups; ask for at least {n_groups}"
        )
    key = np.random.default_rng([seed, 31]).random(n)
    order = np.argsort(key, kind="stable")
    chosen = np.zeros(n, dtype=bool)
    for column, count in enumerate(group_counts):
        ordered_codes = codes[order, column]
        for group in range(count):
            members = order[ordered_codes == group]
            chosen[members[:floor]] = True
    rest = order[~chosen[order]]
    missing = size - int(chosen.sum())
    if missing > 0:
        chosen[rest[:missing]] = True
    return np.flatnonzero(chosen)


def cell_weights(codes: np.ndarray, sample: np.ndarray) -> np.ndarray:
    """Each sampled row's weight: its cell's validation rows over its cell's sampled rows, a cell being
    the rows that share every attribute's code. A group's weighted mean over the sample estimates
    its mean over all validation rows although the floors over-sample small groups (and, inside a
    large group, the rows of a small group of another attribute)."""
    cell = np.zeros(codes.shape[0], dtype=np.int64)
    for column in codes.T:  # renumbered after each column, so the key never overflows
        _, cell = np.unique(cell * (int(column.max(initial=0)) + 1) + column, return_inverse=True)
    population = np.bincount(cell)
    drawn = np.bincount(cell[sample], minlength=population.shape[0])
    weights: np.ndarray = population[cell[sample]] / drawn[cell[sample]]
    return weights.astype(np.float64)


class _Probability(nn.Module):
    """The model's probability of the positive class as a function of its concatenated input layer
    (numeric inputs, then each categorical's embedding), which is where the attributions are taken."""

    def __init__(self, model: TabularMLP) -> None:
        super().__init__()
        self.body = model.body

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.body(x).squeeze(1))


class _SummedProbability(_Probability):
    """The batch's probabilities summed: in eval mode every row's output depends on its own input
    alone, so the gradient of the sum is each row's own gradient, got in one backward pass (Captum
    takes a per-row output's gradient as a tuple of one-element outputs, about half the time here)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x).sum().reshape(1)


def _embeddings(model: TabularMLP) -> list[nn.Embedding]:
    return [emb for emb in model.embeddings if isinstance(emb, nn.Embedding)]


def _input_layer(model: TabularMLP, numeric: np.ndarray, categorical: np.ndarray) -> torch.Tensor:
    with torch.no_grad():
        parts = [torch.from_numpy(np.ascontiguousarray(numeric, dtype=np.float64))]
        parts += [
            emb.weight.double()[torch.from_numpy(np.ascontiguousarray(categorical[:, j]))]
            for j, emb in enumerate(_embeddings(model))
        ]
        return torch.cat(parts, dim=1)


def _baseline(model: TabularMLP, spec: ShardSpec, rows: EncodedRows) -> torch.Tensor:
    parts = [torch.zeros(len(spec.numeric), dtype=torch.float64)]
    with torch.no_grad():
        for j, emb in enumerate(_embeddings(model)):
            share = np.bincount(rows.categorical[:, j], minlength=emb.num_embeddings) / max(1, len(rows))
            parts.append(torch.from_numpy(share) @ emb.weight.double())
    return torch.cat(parts).unsqueeze(0)


def _feature_slices(model: TabularMLP, spec: ShardSpec) -> list[slice]:
    slices = [slice(j, j + 1) for j in range(len(spec.numeric))]
    start = len(spec.numeric)
    for emb in _embeddings(model):
        slices.append(slice(start, start + emb.embedding_dim))
        start += emb.embedding_dim
    return slices


def integrated_gradients(
    model: TabularMLP,
    spec: ShardSpec,
    rows: EncodedRows,
    baseline: torch.Tensor,
    *,
    steps: tuple[int, ...] = IG_STEPS,
    tolerance: float = TOLERANCE,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(attributions [n, F], scores [n], steps used [n]) of ``rows``: Captum's Integrated Gradients
    of the positive class's probability over the input layer, in float64, summed over each
    categorical's embedding units. Every row is integrated with ``steps[0]`` points; a row whose
    attributions miss ``score - baseline score`` by more than ``tolerance`` (the ReLUs' kinks on
    the path make the quadrature converge as 1/steps) is integrated again with the next count."""
    from captum.attr import IntegratedGradients  # heavy: imported where it is used

    explainer = IntegratedGradients(_SummedProbability(model).double().eval())
    probability = _Probability(model).double().eval()
    slices = _feature_slices(model, spec)
    x = _input_layer(model, rows.numeric, rows.categorical)
    with torch.no_grad():
        scores = probability(x).numpy()
        baseline_score = float(probability(baseline)[0])
    out = np.zeros((len(rows), len(slices)), dtype=np.float64)
    used = np.zeros(len(rows), dtype=np.int64)
    todo = np.arange(len(rows))
    for count in steps:
        chunk = max(1, ROWS_PER_CHUNK * steps[0] // count)
        for start in range(0, len(todo), chunk):
            idx = todo[start : start + chunk]
            layer = explainer.attribute(x[idx], baselines=baseline, n_steps=count, method=IG_METHOD).detach()
            for j, cut in enumerate(slices):
                out[idx, j] = layer[:, cut].sum(dim=1).numpy()
        used[todo] = count
        error = np.abs(out[todo].sum(axis=1) - (scores[todo] - baseline_score))
        todo = todo[error > tolerance]
        if todo.size == 0:
            break
    return out, scores, used


def attribute_validation(
    data: Path, checkpoint: Path, hparams: dict[str, Any], *, sample_size: int, seed: int
) -> dict[str, Any]:
    """The arrays of the attributions file (trainer/README.md), keyed as np.savez writes them."""
    torch.set_num_threads(min(2, torch.get_num_threads()))
    hp = resolve_hparams(hparams)
    spec, rows, val = validation_rows(data, hp)
    if len(val) == 0:
        raise ShardError(f"{data}: no validation rows at val_fraction {hp['val_fraction']:g}")
    model = load_model(checkpoint, spec, hp)
    attributes = monitored_attributes(spec)
    group_counts = [len(groups) for _, groups in attributes]
    sample = stratified_sample(val.codes, group_counts, sample_size, seed)
    picked = val.subset(sample)
    baseline = _baseline(model, spec, rows)
    attributions, scores, steps = integrated_gradients(model, spec, picked, baseline)
    with torch.no_grad():
        baseline_score = float(_Probability(model).double().eval()(baseline)[0])
    error = np.abs(attributions.sum(axis=1) - (scores - baseline_score))
    # Once Captum ran: a refusal above (shards, checkpoint, sample) does not import it (0.5 s, matplotlib).
    from captum import __version__ as captum_version

    features = [f.name for f in spec.numeric] + [f.name for f in spec.categorical]
    kinds = ["numeric"] * len(spec.numeric) + ["categorical"] * len(spec.categorical)
    proxy = np.arange(len(val))
    if len(val) > PROXY_ROWS:
        proxy = np.sort(np.random.default_rng([seed, 37]).choice(len(val), PROXY_ROWS, replace=False))
    out: dict[str, Any] = {
        "schema": np.array(ATTRIBUTIONS_SCHEMA, dtype=np.int64),
        "method": np.array(
            f"Integrated Gradients (Captum {captum_version}), midpoint rule, {IG_STEPS[0]} steps a row "
            f"(again with {' then '.join(str(s) for s in IG_STEPS[1:])} for a row whose sum misses by more "
            f"than {TOLERANCE:g}), float64; probability of the positive class"
        ),
        "baseline_kind": np.array(BASELINE_KIND),
        "features": np.array(features, dtype=str),
        "feature_kinds": np.array(kinds, dtype=str),
        "sample_seed": np.array(seed, dtype=np.int64),
        "part": picked.part.astype(np.int64),
        "row_in_part": picked.row_in_part.astype(np.int64),
        "labels": picked.target.astype(np.int8),
        "scores": scores,
        "baseline_score": np.array(baseline_score, dtype=np.float64),
        "attributions": attributions,
        "completeness_error": error,
        "steps": steps,
        "weights": cell_weights(val.codes, sample),
        "values": _values(spec, picked),
        "proxy_values": _values(spec, val.subset(proxy)),
    }
    for column, (key, groups) in enumerate(attributes):
        codes = val.codes[:, column].astype(np.int64)
        out[f"group_codes__{key}"] = codes[sample]
        out[f"group_names__{key}"] = np.array(groups, dtype=str)
        out[f"population__{key}"] = np.bincount(codes, minlength=len(groups) + 1)[: len(groups)].astype(np.int64)
        out[f"proxy_group_codes__{key}"] = codes[proxy]
    return out


def _values(spec: ShardSpec, rows: EncodedRows) -> np.ndarray:
    """Numeric features back on the file's scale (nulls at the mean, as the model saw them),
    categoricals as their codes."""
    numeric = [rows.numeric[:, j].astype(np.float64) * f.std + f.mean for j, f in enumerate(spec.numeric)]
    categorical = [rows.categorical[:, j].astype(np.float64) for j in range(len(spec.categorical))]
    return np.stack(numeric + categorical, axis=1) if numeric or categorical else np.zeros((len(rows), 0))


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive whole number")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.attribute", description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="the trial's shard directory")
    parser.add_argument("--checkpoint", type=Path, required=True, help="the trial's checkpoint folder")
    parser.add_argument("--hparams", required=True, help="the trial's hyperparameters: a JSON object")
    parser.add_argument("--sample-size", type=_positive_int, required=True, help="most validation rows explained")
    parser.add_argument("--seed", type=int, required=True, help="seed of the stratified sample")
    parser.add_argument("--out", type=Path, required=True, help="where to write the attributions (.npz)")
    args = parser.parse_args(argv)
    try:
        hparams = json.loads(args.hparams)
        if not isinstance(hparams, dict):
            raise HparamError("hparams", "--hparams must be a JSON object")
        arrays = attribute_validation(args.data, args.checkpoint, hparams, sample_size=args.sample_size, seed=args.seed)
    except json.JSONDecodeError as exc:
        print(f"trainer.attribute: --hparams is not valid JSON: {exc}", file=sys.stderr)
        return 2
    except (ShardError, HparamError, OSError, KeyError, RuntimeError, ValueError) as exc:
        print(f"trainer.attribute: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    # Written beside the target and renamed into place: a reader never sees half a file.
    partial = args.out.with_name(f".{args.out.name}.partial")
    try:
        with partial.open("wb") as fh:
            np.savez(fh, **arrays)
        os.replace(partial, args.out)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        print(f"trainer.attribute: cannot write {args.out}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
