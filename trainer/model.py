"""The classifier: an MLP over standardised numeric features and embedded categoricals."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn
from torch import nn

from trainer.hparams import check_model_size, check_value, embedding_width, input_width


class SyncBatchNorm1d(nn.BatchNorm1d):
    """Batch norm whose training statistics are computed over the union of all workers' batches.

    Same algorithm as torch's SyncBatchNorm (which only runs on accelerators): every worker
    all-reduces (sum, sum of squares, count) through an autograd-aware all_reduce, so gloo on CPU
    works too. Outside a process group, or in eval mode, it is plain BatchNorm1d.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.training and dist.is_available() and dist.is_initialized()):
            return super().forward(x)
        if dist.get_world_size() == 1:
            return super().forward(x)
        count = torch.full((1,), float(x.shape[0]), dtype=x.dtype, device=x.device)
        stats = torch.cat([x.sum(dim=0), (x * x).sum(dim=0), count])
        stats = dist_fn.all_reduce(stats)  # type: ignore[no-untyped-call]
        c = x.shape[1]
        n = stats[-1]
        mean = stats[:c] / n
        var = (stats[c : 2 * c] / n - mean * mean).clamp(min=0.0)
        if self.track_running_stats and self.running_mean is not None and self.running_var is not None:
            with torch.no_grad():
                momentum = self.momentum if self.momentum is not None else 0.1
                unbiased = var * (n / (n - 1).clamp(min=1.0))
                self.running_mean.mul_(1 - momentum).add_(momentum * mean.detach())
                self.running_var.mul_(1 - momentum).add_(momentum * unbiased.detach())
                if self.num_batches_tracked is not None:
                    self.num_batches_tracked.add_(1)
        y = (x - mean) / torch.sqrt(var + self.eps)
        if self.affine:
            y = y * self.weight + self.bias
        out: torch.Tensor = y
        return out


def _norm(kind: str, width: int) -> nn.Module:
    if kind == "none":
        return nn.Identity()
    if kind == "batch":
        return nn.BatchNorm1d(width)
    if kind == "sync_batch":
        return SyncBatchNorm1d(width)
    check_value("normalization", kind)  # raises, naming the allowed values
    raise AssertionError(f"hparams.NORMALIZATIONS holds {kind!r}, which model.py does not build")


class TabularMLP(nn.Module):
    def __init__(
        self,
        n_numeric: int,
        cardinalities: Sequence[int],
        hidden_sizes: Sequence[int],
        *,
        dropout: float = 0.0,
        normalization: str = "none",
        embedding_dim: int = 8,
    ) -> None:
        super().__init__()
        embeddings = [nn.Embedding(card, embedding_width(card, embedding_dim)) for card in cardinalities]
        self.embeddings = nn.ModuleList(embeddings)
        width = input_width(n_numeric, cardinalities, embedding_dim)
        if width == 0:
            raise ValueError("the shards declare no features")
        # The portal checked an upper bound of this at launch; here the input width is exact.
        check_model_size(hidden_sizes, normalization=normalization, input_width=width)
        layers: list[nn.Module] = []
        for size in hidden_sizes:
            layers += [nn.Linear(width, size), _norm(normalization, size), nn.ReLU()]
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            width = size
        layers.append(nn.Linear(width, 1))
        self.body = nn.Sequential(*layers)

    def forward(self, numeric: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        parts = [numeric] + [emb(categorical[:, j]) for j, emb in enumerate(self.embeddings)]
        logits: torch.Tensor = self.body(torch.cat(parts, dim=1)).squeeze(1)
        return logits
