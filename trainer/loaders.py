"""What Determined's data loaders iterate: the encoded rows as tensors, a whole batch at a time,
and the batch sampler that deals the training rows to the workers (:mod:`trainer.data` reads them)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch

from trainer.data import EncodedRows, stratified_order
from trainer.hparams import check_value

Batch = dict[str, torch.Tensor]


class TabularDataset(torch.utils.data.Dataset[Batch]):
    """Map-style dataset whose ``__getitems__`` returns a whole batch (no per-row collation)."""

    def __init__(self, rows: EncodedRows) -> None:
        self.numeric = torch.from_numpy(np.ascontiguousarray(rows.numeric))
        self.categorical = torch.from_numpy(np.ascontiguousarray(rows.categorical))
        self.target = torch.from_numpy(np.ascontiguousarray(rows.target))
        self.codes = torch.from_numpy(np.ascontiguousarray(rows.codes))

    def __len__(self) -> int:
        return len(self.target)

    def __getitem__(self, index: int) -> Batch:
        return self.__getitems__([index])

    def __getitems__(self, indices: Sequence[int]) -> Batch:
        idx = torch.as_tensor(indices, dtype=torch.int64)
        return {
            "numeric": self.numeric[idx],
            "categorical": self.categorical[idx],
            "target": self.target[idx],
            "codes": self.codes[idx],
        }


def passthrough_collate(batch: Batch) -> Batch:
    return batch


class GroupAwareBatchSampler(torch.utils.data.Sampler[list[int]]):
    """Global sequence of per-worker batches; Determined deals batch i to rank i % world_size.

    ``stratified``: one stratified order per epoch (see :func:`stratified_order`), cut into batches,
    so every worker gets the global group mix. ``plain``: the training rows, in shard order, are cut
    into ``world_size`` contiguous blocks - each worker trains on "its own parts", as a naive
    reader of the shards would - shuffled within the block; with skewed parts the workers'
    populations differ. Each ``__iter__`` is one epoch; the order depends only on (seed, epoch).
    """

    def __init__(
        self,
        strata: np.ndarray,
        batch_size: int,
        world_size: int,
        *,
        mode: str,
        seed: int,
    ) -> None:
        check_value("sampler", mode)  # hparams.SAMPLERS; raises naming the allowed values
        if batch_size < 1:
            raise ValueError("batch size must be positive")
        self.strata = strata
        self.batch_size = batch_size
        self.world_size = world_size
        self.mode = mode
        self.seed = seed
        self.epoch = 0
        n = int(strata.shape[0])
        self._len: int
        if mode == "stratified":
            self._len = n // batch_size
        else:
            self._len = world_size * ((n // world_size) // batch_size)
        if self._len < world_size:
            raise ValueError(f"{n} training rows are too few for {world_size} workers with batch size {batch_size}")

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[list[int]]:
        rng = np.random.default_rng([self.seed, self.epoch])
        self.epoch += 1
        bs = self.batch_size
        if self.mode == "stratified":
            order = stratified_order(self.strata, rng)
            for i in range(self._len):
                yield order[i * bs : (i + 1) * bs].tolist()
            return
        n = self.strata.shape[0]
        block = n // self.world_size
        per_block = self._len // self.world_size
        blocks = [rng.permutation(np.arange(r * block, (r + 1) * block)) for r in range(self.world_size)]
        for i in range(per_block):
            for r in range(self.world_size):
                yield blocks[r][i * bs : (i + 1) * bs].tolist()
