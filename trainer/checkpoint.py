"""A trained checkpoint and the validation rows it was validated on, loaded outside Determined.

Shared by :mod:`trainer.predict` and :mod:`trainer.attribute`, which the portal runs in a subprocess
(it never imports torch): both split the shards exactly as training did and rebuild the model from
the trial's hyperparameters.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from trainer.bias import stats_group_key, stats_key
from trainer.data import EncodedRows, ShardError, ShardSpec, load_shards, validation_mask
from trainer.model import TabularMLP


def model_state(checkpoint: Path) -> dict[str, Any]:
    """The model's parameters from a checkpoint folder (``state_dict.pth``, Determined's PyTorchTrial layout)."""
    if not checkpoint.is_dir():
        raise ShardError(f"checkpoint folder {checkpoint} does not exist")
    path = checkpoint / "state_dict.pth"
    if not path.is_file():
        raise ShardError(f"checkpoint {checkpoint.name} holds no state_dict.pth")
    # The checkpoint holds numpy RNG state beside the weights: not loadable with weights_only. It is
    # the portal's own run folder's, written by this trainer.
    saved = torch.load(path, map_location="cpu", weights_only=False)
    if not isinstance(saved, dict) or not ("models_state_dict" in saved or "model_state_dict" in saved):
        raise ShardError(f"checkpoint {checkpoint.name}: state_dict.pth holds no model state")
    state = saved["models_state_dict"][0] if "models_state_dict" in saved else saved["model_state_dict"]
    # A model wrapped for distributed training saves its parameters under "module.".
    return {key.removeprefix("module."): value for key, value in state.items()}


def validation_rows(data: Path, hp: dict[str, Any]) -> tuple[ShardSpec, EncodedRows, EncodedRows]:
    """The shard spec, every row, and the validation rows (shard order) as training split them."""
    spec, rows = load_shards(data)
    is_val = validation_mask(rows.part, rows.row_in_part, float(hp["val_fraction"]))
    return spec, rows, rows.subset(np.flatnonzero(is_val))


def load_model(checkpoint: Path, spec: ShardSpec, hp: dict[str, Any]) -> TabularMLP:
    """The trial's model in eval mode; a checkpoint whose layers do not fit these shards' features
    (trained on another dataset version) is refused in one line."""
    model = TabularMLP(
        n_numeric=len(spec.numeric),
        cardinalities=spec.cardinalities,
        hidden_sizes=hp["hidden_sizes"],
        dropout=float(hp["dropout"]),
        normalization=str(hp["normalization"]),
        embedding_dim=int(hp["embedding_dim"]),
    )
    try:
        model.load_state_dict(model_state(checkpoint))
    except RuntimeError as exc:
        detail = " ".join(str(exc).split())
        raise ShardError(
            f"checkpoint {checkpoint.name} does not fit these shards' features and hyperparameters "
            f"(trained on other data or with other hidden_sizes/embedding_dim/normalization): {detail[:300]}"
        ) from None
    model.eval()
    return model


def monitored_attributes(spec: ShardSpec) -> list[tuple[str, list[str]]]:
    """Each monitored attribute (declared ones, then the intersection) as (key, group keys), named
    as ``bias_stats.json`` names them; its column in ``EncodedRows.codes`` is its position here."""
    return [
        (stats_key(attr.names), [stats_group_key(group) for group in attr.groups]) for attr in spec.layout().attributes
    ]
