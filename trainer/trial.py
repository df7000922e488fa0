"""The Determined trial: the model, its data loaders, the bias monitor's reducers and the metrics
file, and the fit that :mod:`trainer.train` starts once it has refused what it refuses. With
trainer.train, the only module of trainer/ that imports Determined.
"""

from __future__ import annotations

import argparse
import json
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from determined import core, pytorch

from trainer import bias, optim
from trainer.data import EncodedRows, ShardSpec, load_shards, strata_of, validation_mask
from trainer.hparams import HparamError, resolve_hparams
from trainer.loaders import GroupAwareBatchSampler, TabularDataset, passthrough_collate
from trainer.model import TabularMLP


class ValidationReducer(pytorch.MetricReducer):
    """Sums per-group confusion counts (and loss, AUC histogram) across workers."""

    def __init__(self, accumulator: bias.ConfusionAccumulator, search_lambda: float) -> None:
        self.acc = accumulator
        self.search_lambda = search_lambda
        self.last_counts: np.ndarray | None = None

    def reset(self) -> None:
        self.acc.reset()

    def update(self, codes: torch.Tensor | None, y: torch.Tensor, prob: torch.Tensor, loss_sum: torch.Tensor) -> None:
        self.acc.update(codes, y, prob, loss_sum)

    def per_slot_reduce(self) -> tuple[np.ndarray, float]:
        return self.acc.state()

    def cross_slot_reduce(self, per_slot_metrics: list[Any]) -> dict[str, float]:
        states = [(np.asarray(c), float(s)) for c, s in per_slot_metrics]
        if self.acc.layout is not None:
            total = np.sum([c for c, _ in states], axis=0)
            self.last_counts = total[: self.acc.layout.n_cells]
        return self.acc.metrics(states, self.search_lambda)


class WorkerShareReducer(pytorch.MetricReducer):
    """Gathers each worker's group counts over its recent-batch window; reported per rank."""

    def __init__(self, window: bias.ShareWindow) -> None:
        self.window = window

    def reset(self) -> None:
        # Deliberately keeps the sliding window across reporting periods.
        pass

    def per_slot_reduce(self) -> np.ndarray:
        return self.window.state()

    def cross_slot_reduce(self, per_slot_metrics: list[Any]) -> dict[str, float]:
        return bias.worker_share_metrics([np.asarray(p) for p in per_slot_metrics], self.window.layout)


class MetricsFile(pytorch.PyTorchCallback):
    """Writes every reported metric as one JSON line (schema in trainer/README.md)."""

    def __init__(self, path: Path | None, trial_id: int, context: pytorch.PyTorchTrialContext) -> None:
        self.path = path
        self.trial_id = trial_id
        self.context = context
        self.is_chief = context.distributed.get_rank() == 0
        if self.path is not None and self.is_chief:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text("")

    def _write(self, kind: str, step: int, metrics: dict[str, Any]) -> None:
        if self.path is None or not self.is_chief:
            return
        clean = {k: _jsonable(v) for k, v in sorted(metrics.items())}
        line = {"schema": bias.METRICS_SCHEMA, "trial": self.trial_id, "kind": kind, "step": step, "metrics": clean}
        with self.path.open("a") as fh:
            fh.write(json.dumps(line, allow_nan=False) + "\n")

    def on_training_workload_end(self, avg_metrics: dict[str, Any], batch_metrics: Any) -> None:
        step = int(avg_metrics.get("batches", self.context.current_train_batch() + 1))
        self._write("training", step, {k: v for k, v in avg_metrics.items() if k not in ("batches", "epochs")})

    def on_validation_end(self, metrics: dict[str, Any]) -> None:
        self._write("validation", self.context.current_train_batch() + 1, metrics)


class BiasStats(pytorch.PyTorchCallback):
    """Stores the latest validation's per-group counts as bias_stats.json beside the weights."""

    def __init__(self, trial: BiasTrial) -> None:
        self.trial = trial

    def on_checkpoint_write_end(self, checkpoint_dir: str) -> None:
        self.trial.write_bias_stats(Path(checkpoint_dir) / "bias_stats.json")


def _jsonable(value: Any) -> Any:
    if isinstance(value, (np.generic, np.ndarray)):
        value = value.tolist()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


class BiasTrial(pytorch.PyTorchTrial):
    def __init__(
        self,
        context: pytorch.PyTorchTrialContext,
        data_dir: str | Path,
        hparams: dict[str, Any],
        metrics_out: Path | None = None,
        trial_id: int = 1,
        *,
        shards: tuple[ShardSpec, EncodedRows] | None = None,
    ) -> None:
        """``shards``: ``data_dir``'s shards already read (trainer.train reads them before it imports
        torch, to refuse bad ones at once); read here when not given."""
        self.context = context
        self.hp = resolve_hparams(hparams)
        seed = int(self.hp["seed"])
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
        self.world_size = context.distributed.get_size()
        self.rank = context.distributed.get_rank()

        self.spec, rows = shards if shards is not None else load_shards(data_dir)
        self.layout = self.spec.layout()
        is_val = validation_mask(rows.part, rows.row_in_part, float(self.hp["val_fraction"]))
        self.train_rows = rows.subset(np.flatnonzero(~is_val))
        self.val_rows = rows.subset(np.flatnonzero(is_val))
        if len(self.val_rows) < self.world_size:
            raise ValueError("too few validation rows for the number of workers")
        self.monitor = bool(self.hp["bias_monitor"]) and len(self.layout.attributes) > 0
        self.declared = self.layout.attributes[: len(self.spec.attributes)]

        model = TabularMLP(
            n_numeric=len(self.spec.numeric),
            cardinalities=self.spec.cardinalities,
            hidden_sizes=self.hp["hidden_sizes"],
            dropout=float(self.hp["dropout"]),
            normalization=str(self.hp["normalization"]),
            embedding_dim=int(self.hp["embedding_dim"]),
        )
        self.model = context.wrap_model(model)
        self.optimizer = context.wrap_optimizer(optim.adam(self.model.parameters(), lr=float(self.hp["learning_rate"])))
        device = context.device
        self.val_reducer = context.wrap_reducer(
            ValidationReducer(
                bias.ConfusionAccumulator(self.layout if self.monitor else None, device),
                float(self.hp["search_lambda"]),
            ),
            name=None,
            for_training=False,
        )
        self.share_window: bias.ShareWindow | None = None
        if self.monitor:
            self.share_window = bias.ShareWindow(self.layout, int(self.hp["share_window"]), device)
            context.wrap_reducer(WorkerShareReducer(self.share_window), name=None, for_validation=False)
        self.fairness_lambda = float(self.hp["fairness_lambda"])
        self._callbacks: dict[str, pytorch.PyTorchCallback] = {
            "metrics_file": MetricsFile(metrics_out, trial_id, context),
            "bias_stats": BiasStats(self),
        }

    def build_callbacks(self) -> dict[str, pytorch.PyTorchCallback]:
        return self._callbacks

    def build_training_data_loader(self) -> pytorch.DataLoader:
        group_sizes = [len(a.groups) for a in self.declared]
        sampler = GroupAwareBatchSampler(
            strata_of(self.train_rows, len(self.declared), group_sizes),
            self.context.get_per_slot_batch_size(),
            self.world_size,
            mode=str(self.hp["sampler"]),
            seed=int(self.hp["seed"]),
        )
        return pytorch.DataLoader(
            TabularDataset(self.train_rows), batch_sampler=sampler, collate_fn=passthrough_collate
        )

    def build_validation_data_loader(self) -> pytorch.DataLoader:
        # Every validation row is evaluated exactly once: whole batches are dealt round-robin to
        # workers and nothing is padded; every worker needs at least one batch.
        n = len(self.val_rows)
        batch = min(int(self.hp["val_batch_size"]), -(-n // self.world_size))
        return pytorch.DataLoader(
            TabularDataset(self.val_rows), batch_size=batch, shuffle=False, collate_fn=passthrough_collate
        )

    def _forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        logits: torch.Tensor = self.model(batch["numeric"], batch["categorical"])
        return logits

    def train_batch(self, batch: dict[str, torch.Tensor], epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        logits = self._forward(batch)
        y = batch["target"]
        bce = F.binary_cross_entropy_with_logits(logits, y)
        loss = bce
        metrics: dict[str, Any] = {"loss": loss}
        if self.fairness_lambda > 0:
            penalty = bias.group_variance_penalty(torch.sigmoid(logits), y, batch["codes"], self.declared)
            loss = bce + self.fairness_lambda * penalty
            metrics = {"loss": loss, "bce": bce, "fairness_penalty": penalty}
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        if self.share_window is not None:
            self.share_window.update(batch["codes"])
        return metrics

    def evaluate_batch(self, batch: dict[str, torch.Tensor], batch_idx: int) -> dict[str, Any]:
        logits = self._forward(batch)
        y = batch["target"]
        loss_sum = F.binary_cross_entropy_with_logits(logits, y, reduction="sum")
        self.val_reducer.update(batch["codes"] if self.monitor else None, y, torch.sigmoid(logits), loss_sum)
        return {}

    def write_bias_stats(self, path: Path) -> None:
        counts = self.val_reducer.last_counts
        doc: dict[str, Any] = {
            "schema": bias.METRICS_SCHEMA,
            "step": self.context.current_train_batch() + 1,
            "cells": list(bias.CELL_NAMES),
            "attributes": bias.counts_to_json(counts, self.layout) if counts is not None else None,
        }
        path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def _local_distributed() -> core.DistributedContext | None:
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return None
    # Determined asserts this before accepting a torch.distributed context.
    os.environ["USE_TORCH_DISTRIBUTED"] = "true"
    if not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return core.DistributedContext.from_torch_distributed()


def fit(
    args: argparse.Namespace,
    hparams: dict[str, Any],
    shards: tuple[ShardSpec, EncodedRows],
    *,
    on_cluster: bool,
    trial_id: int,
    latest_checkpoint: str | None,
) -> HparamError | None:
    """Train as ``args`` (trainer.train's arguments) say; the refusal of a model that does not fit,
    which only the shards' exact input width tells (hparams.check_model_size), is returned."""
    distributed = None if on_cluster else _local_distributed()
    period = args.validation_period or args.batches
    with pytorch.init(hparams=hparams, distributed=distributed, enable_tensorboard_logging=False) as context:
        try:
            trial = BiasTrial(
                context, args.data, hparams, metrics_out=args.metrics_out, trial_id=trial_id, shards=shards
            )
        except HparamError as exc:
            return exc
        trainer = pytorch.Trainer(trial, context)
        trainer.fit(
            max_length=pytorch.Batch(args.batches),
            validation_period=pytorch.Batch(period),
            reporting_period=pytorch.Batch(args.reporting_period or period),
            checkpoint_policy="best" if on_cluster else "none",
            latest_checkpoint=latest_checkpoint,
        )
    if distributed is not None and dist.is_initialized():
        dist.destroy_process_group()
    return None
