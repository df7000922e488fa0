"""Bias-monitor maths: per-group confusion counts and the metrics derived from them.

Pure numpy/torch (no Determined), so it is fast to test and benchmark and another engine can reuse
it. Counts are kept as one flat int64 vector laid out ``[slot * 4 + cell]`` where a *slot* is one
group of one attribute (each attribute also has a trailing ``unknown`` slot) and ``cell`` is
``2 * y_true + y_pred``: 0 = tn, 1 = fp, 2 = fn, 3 = tp. Counts from several workers are combined by
summing the vectors, never by averaging ratios.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

# The monitored attributes, their groups and keys (numpy only: trainer.data reads shards without torch).
from trainer.groups import CELLS as CELLS
from trainer.groups import INTERSECTION_SEP as INTERSECTION_SEP
from trainer.groups import Attribute as Attribute
from trainer.groups import GroupLayout as GroupLayout
from trainer.groups import intersection_codes as intersection_codes
from trainer.groups import metric_key as metric_key
from trainer.groups import metric_key_part as metric_key_part
from trainer.groups import stats_group_key as stats_group_key
from trainer.groups import stats_key as stats_key

METRICS_SCHEMA = 1

TN, FP, FN, TP = 0, 1, 2, 3
CELL_NAMES = ("tn", "fp", "fn", "tp")
AUC_BINS = 4096
# The level at which a recall gap counts as beyond noise: the portal's default alpha
# (auditportal/fairness/statistics/stats.py DEFAULT_ALPHA), Bonferroni-split over an attribute's
# recall family as its verdicts are.
NOISE_ALPHA = 0.05


def _index_dtype(max_index: int) -> torch.dtype:
    # bincount over uint8 is several times faster than over int64 on CPU.
    if max_index < 256:
        return torch.uint8
    return torch.int32 if max_index < 2**31 else torch.int64


def bincount(index: torch.Tensor, length: int) -> torch.Tensor:
    """Histogram of ``index`` (values in [0, length)) as int64 of exactly ``length``, without a host sync.

    On CPU this is ``torch.bincount``. On accelerators ``torch.bincount`` reads the input's min and
    max back to the host to size its output, so there the same histogram is a scatter-add into a
    fixed-size tensor (:func:`scatter_count`), which stays asynchronous.
    """
    if index.device.type == "cpu":
        return torch.bincount(index, minlength=length)
    return scatter_count(index, length)


def scatter_count(index: torch.Tensor, length: int) -> torch.Tensor:
    ones = torch.ones(index.shape, dtype=torch.int64, device=index.device)
    return torch.zeros(length, dtype=torch.int64, device=index.device).index_add_(0, index.to(torch.int64), ones)


def confusion_index(slots: torch.Tensor, y_true: torch.Tensor, y_pred: torch.Tensor, n_slots: int) -> torch.Tensor:
    """Flat cell index ``slot * 4 + 2 * y_true + y_pred``; slots may be [B] or [B, S] (global slot ids).

    Three passes over the batch in the narrowest integer type that holds the index (uint8 for up to
    64 slots), which is what keeps the single bincount cheap.
    """
    dtype = _index_dtype(n_slots * CELLS)
    pred = y_pred.view(torch.uint8) if y_pred.dtype == torch.bool and dtype == torch.uint8 else y_pred.to(dtype)
    cell = torch.add(pred, y_true.to(dtype), alpha=2)
    if slots.dim() == 2:
        return torch.add(cell.unsqueeze(1), slots.to(dtype), alpha=CELLS)
    return cell.add_(slots.to(dtype), alpha=CELLS)


def count_confusion(slots: torch.Tensor, y_true: torch.Tensor, y_pred: torch.Tensor, n_slots: int) -> torch.Tensor:
    """Confusion counts per slot, shape [n_slots, 4], computed with a single bincount."""
    idx = confusion_index(slots, y_true, y_pred, n_slots).reshape(-1)
    return bincount(idx, n_slots * CELLS).view(n_slots, CELLS)


class ConfusionAccumulator:
    """Accumulates validation counts on the device with one bincount per batch.

    Besides the per-group cells it keeps the overall confusion (4 cells) and a probability
    histogram per class for a binned AUC, all in the same bincount; the loss is summed as a
    device tensor. Nothing here synchronises with the host until :meth:`state` is called.
    """

    def __init__(self, layout: GroupLayout | None, device: torch.device | str = "cpu") -> None:
        self.layout = layout
        self.device = torch.device(device)
        n_group_cells = layout.n_cells if layout is not None else 0
        self._overall_offset = n_group_cells
        self._hist_offset = n_group_cells + CELLS
        self.n_total = self._hist_offset + 2 * AUC_BINS
        offsets = layout.offsets if layout is not None else ()
        self._slot_offsets = torch.tensor(offsets, dtype=torch.int32, device=self.device)
        self.reset()

    def reset(self) -> None:
        self.counts = torch.zeros(self.n_total, dtype=torch.int64, device=self.device)
        self.loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)

    def update(
        self,
        codes: torch.Tensor | None,
        y_true: torch.Tensor,
        prob: torch.Tensor,
        loss_sum: torch.Tensor,
    ) -> None:
        """codes: [B, S] per-attribute codes (unknown = len(groups)); y_true in {0,1}; prob in [0,1]."""
        dt = torch.int32
        y = y_true.to(dt)
        pred = prob >= 0.5
        cell = torch.add(pred.to(dt), y, alpha=2)
        bins = (prob.detach() * AUC_BINS).to(dt).clamp_(0, AUC_BINS - 1)
        parts = [cell + self._overall_offset, torch.add(y, bins, alpha=2).add_(self._hist_offset)]
        if self.layout is not None and codes is not None:
            slots = codes.to(dt) + self._slot_offsets
            group_idx = confusion_index(slots, y, pred, self.layout.n_slots)
            parts.append(group_idx.reshape(-1).to(dt))
        self.counts += bincount(torch.cat(parts), self.n_total)
        self.loss_sum += loss_sum.detach().to(torch.float64)

    def state(self) -> tuple[np.ndarray, float]:
        return self.counts.cpu().numpy(), float(self.loss_sum.item())

    def metrics(self, states: Sequence[tuple[np.ndarray, float]], search_lambda: float) -> dict[str, float]:
        """Combine per-worker states by summing and derive every reported validation metric."""
        counts = np.sum([s[0] for s in states], axis=0)
        loss_sum = math.fsum(s[1] for s in states)
        overall = counts[self._overall_offset : self._overall_offset + CELLS]
        n = int(overall.sum())
        hist = counts[self._hist_offset :].reshape(AUC_BINS, 2)
        out: dict[str, float] = {}
        out["val_loss"] = loss_sum / n if n else 0.0
        out["accuracy"] = float(overall[TP] + overall[TN]) / n if n else 0.0
        out["val_examples"] = float(n)
        auc = binned_auc(hist[:, 1], hist[:, 0])
        if auc is not None:
            out["auc"] = auc
        beyond_noise = 0.0
        if self.layout is not None:
            group = group_metrics(counts[: self.layout.n_cells].reshape(self.layout.n_slots, CELLS), self.layout)
            out.update(group)
            beyond_noise = group["eod_beyond_noise"]
        out["fair_objective"] = fair_objective(out["val_loss"], beyond_noise, search_lambda)
        return out


def fair_objective(val_loss: float, eod_beyond_noise: float, search_lambda: float) -> float:
    """The searcher's metric (smaller is better): the loss plus ``search_lambda`` times the largest
    recall gap beyond its sampling noise (:func:`gap_beyond_noise`), not the raw ``eod``, which
    small groups set by noise alone."""
    return val_loss + search_lambda * eod_beyond_noise


def gap_beyond_noise(
    tp: Sequence[int] | np.ndarray, positives: Sequence[int] | np.ndarray, *, alpha: float = NOISE_ALPHA
) -> float:
    """One attribute's largest recall gap beyond noise: over every pair (i, j) of its groups with
    positives, ``max(0, |recall_i - recall_j| - floor_ij)``; 0 with fewer than two such groups.

    ``floor_ij = z * sqrt(p (1 - p) (1/n_i + 1/n_j))`` is the pair's two-sample noise floor, the
    half-width of a difference interval at no gap: ``n`` the groups' positives, ``p`` their pooled
    plus-four recall ``(tp_i + tp_j + 2) / (n_i + n_j + 4)`` (never 0 or 1, so 0 of 2 against 2 of 2
    still has a floor), ``z`` the normal quantile at ``1 - alpha / (2k)``, k the attribute's groups
    with positives less one (its recall family, as the portal's verdicts count it). This is the
    portal's ``stats.pair_noise_floor`` at the level of ``fairness/statistics/eod.py``, the floor the
    experiment page shades under the eod; tests/trainer/test_noise_aware.py holds the two equal.
    """
    n = np.asarray(positives, dtype=np.int64)
    x = np.asarray(tp, dtype=np.int64)
    has = n > 0
    if int(has.sum()) < 2:
        return 0.0
    n, x = n[has].astype(np.float64), x[has].astype(np.float64)
    k = len(n) - 1
    z = statistics.NormalDist().inv_cdf(1 - alpha / (2 * k))
    recall = x / n
    i, j = np.triu_indices(len(n), k=1)
    pooled = (x[i] + x[j] + 2) / (n[i] + n[j] + 4)
    floor = z * np.sqrt(pooled * (1 - pooled) * (1 / n[i] + 1 / n[j]))
    excess = np.abs(recall[i] - recall[j]) - floor
    return float(max(0.0, excess.max()))


def binned_auc(pos_hist: np.ndarray, neg_hist: np.ndarray) -> float | None:
    """ROC AUC from per-class score histograms; ties within a bin count one half."""
    pos = pos_hist.astype(np.float64)
    neg = neg_hist.astype(np.float64)
    n_pos, n_neg = pos.sum(), neg.sum()
    if n_pos == 0 or n_neg == 0:
        return None
    neg_below = np.cumsum(neg) - neg
    return float(np.sum(pos * (neg_below + 0.5 * neg)) / (n_pos * n_neg))


def group_metrics(counts: np.ndarray, layout: GroupLayout) -> dict[str, float]:
    """Recall, FPR, counts and equal-opportunity differences from per-slot confusion counts.

    A group without positives has no recall and one without negatives no FPR (the keys are
    omitted), so ``eod`` never becomes NaN; unknown values are counted but excluded from rates.
    Beside each ``eod`` its noise-aware counterpart ``eod_beyond_noise`` (:func:`gap_beyond_noise`).
    """
    counts = np.asarray(counts, dtype=np.int64).reshape(layout.n_slots, CELLS)
    out: dict[str, float] = {}
    gaps: list[float] = []
    beyond: list[float] = []
    for attr, off in zip(layout.attributes, layout.offsets, strict=True):
        a = metric_key(attr.names)
        block = counts[off : off + attr.n_slots]
        recalls: list[float] = []
        for g, group in enumerate(attr.groups):
            tn, fp, fn, tp = (int(v) for v in block[g])
            gk = metric_key(group)
            for name, value in zip(CELL_NAMES, (tn, fp, fn, tp), strict=True):
                out[f"count/{a}/{gk}/{name}"] = float(value)
            if tp + fn > 0:
                r = tp / (tp + fn)
                out[f"recall/{a}/{gk}"] = r
                recalls.append(r)
            if fp + tn > 0:
                out[f"fpr/{a}/{gk}"] = fp / (fp + tn)
        out[f"count/{a}/unknown"] = float(block[attr.unknown_code].sum())
        gap = max(recalls) - min(recalls) if len(recalls) >= 2 else 0.0
        out[f"eod/{a}"] = gap
        gaps.append(gap)
        groups = block[: len(attr.groups)]
        excess = gap_beyond_noise(groups[:, TP], groups[:, TP] + groups[:, FN])
        out[f"eod_beyond_noise/{a}"] = excess
        beyond.append(excess)
    out["eod"] = max(gaps) if gaps else 0.0
    out["eod_beyond_noise"] = max(beyond) if beyond else 0.0
    return out


def counts_to_json(counts: np.ndarray, layout: GroupLayout) -> dict[str, Any]:
    """Per-group counts as a nested, human-readable mapping (used for bias_stats.json)."""
    counts = np.asarray(counts, dtype=np.int64).reshape(layout.n_slots, CELLS)
    out: dict[str, Any] = {}
    for attr, off in zip(layout.attributes, layout.offsets, strict=True):
        groups: dict[str, dict[str, int]] = {}
        for g, group in enumerate(attr.groups):
            groups[stats_group_key(group)] = {n: int(v) for n, v in zip(CELL_NAMES, counts[off + g], strict=True)}
        out[stats_key(attr.names)] = {"groups": groups, "unknown": int(counts[off + attr.unknown_code].sum())}
    return out


class ShareWindow:
    """Each worker's group counts over the last ``window`` training batches.

    ``update`` only keeps a reference to the batch's code tensor (on the device; no copy, no
    kernel, no host synchronisation), so the per-batch cost is a deque append; ``state`` counts the
    window with one bincount when metrics are reported.
    """

    def __init__(self, layout: GroupLayout, window: int, device: torch.device | str = "cpu") -> None:
        if window < 1:
            raise ValueError("share window must be at least one batch")
        self.layout = layout
        self.window = window
        self.device = torch.device(device)
        self._offsets = torch.tensor(layout.offsets, dtype=torch.int64, device=self.device)
        self._batches: deque[torch.Tensor] = deque(maxlen=window)

    def update(self, codes: torch.Tensor) -> None:
        self._batches.append(codes.detach())

    def state(self) -> np.ndarray:
        if not self._batches:
            return np.zeros(self.layout.n_slots, dtype=np.int64)
        slots = (torch.cat(list(self._batches)).to(torch.int64) + self._offsets).reshape(-1)
        return bincount(slots, self.layout.n_slots).cpu().numpy()


def worker_share_metrics(per_rank: Sequence[np.ndarray], layout: GroupLayout) -> dict[str, float]:
    """``worker_share/<attr>/<group>/rank<k>`` and ``worker_share_spread/<attr>``.

    A worker's share of a group is its rows in that group over all its rows in the window
    (unknown is reported as the group ``unknown``); the spread of an attribute is the largest
    max-minus-min across ranks over its groups.
    """
    out: dict[str, float] = {}
    for attr, off in zip(layout.attributes, layout.offsets, strict=True):
        a = metric_key(attr.names)
        names = [*(metric_key(group) for group in attr.groups), "unknown"]
        shares = np.zeros((len(per_rank), attr.n_slots))
        for k, counts in enumerate(per_rank):
            block = np.asarray(counts[off : off + attr.n_slots], dtype=np.float64)
            total = block.sum()
            if total > 0:
                shares[k] = block / total
        for g, group in enumerate(names):
            for k in range(len(per_rank)):
                out[f"worker_share/{a}/{group}/rank{k}"] = float(shares[k, g])
        spread = shares.max(axis=0) - shares.min(axis=0)
        out[f"worker_share_spread/{a}"] = float(spread.max()) if spread.size else 0.0
    return out


def group_variance_penalty(
    prob: torch.Tensor, y_true: torch.Tensor, codes: torch.Tensor, attributes: Sequence[Attribute]
) -> torch.Tensor:
    """Mean over attributes of the variance across groups of the mean probability among positives.

    Differentiable surrogate of the recall gap. Groups without positives in the batch and unknown
    values are left out; computed with masks only, so it never synchronises with the host.
    """
    n_slots = sum(a.n_slots for a in attributes)
    offsets = []
    acc = 0
    for attr in attributes:
        offsets.append(acc)
        acc += attr.n_slots
    off = torch.tensor(offsets, dtype=torch.int64, device=prob.device)
    slots = (codes[:, : len(attributes)].to(torch.int64) + off).reshape(-1)
    y = y_true.to(prob.dtype)
    weights = y.unsqueeze(1).expand(-1, len(attributes)).reshape(-1)
    values = (prob * y).unsqueeze(1).expand(-1, len(attributes)).reshape(-1)
    pos = torch.zeros(n_slots, dtype=prob.dtype, device=prob.device).index_add(0, slots, weights)
    total = torch.zeros(n_slots, dtype=prob.dtype, device=prob.device).index_add(0, slots, values)
    mean = total / pos.clamp(min=1.0)
    valid = (pos > 0).to(prob.dtype)
    penalties = []
    for attr, o in zip(attributes, offsets, strict=True):
        v = valid[o : o + len(attr.groups)]
        m = mean[o : o + len(attr.groups)]
        k = v.sum().clamp(min=1.0)
        mu = (v * m).sum() / k
        penalties.append((v * (m - mu) ** 2).sum() / k)
    if not penalties:
        return prob.sum() * 0.0
    return torch.stack(penalties).mean()
