"""The classifier's layers, including batch norm synchronised across two gloo workers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

from tests.trainer.trainer_testkit import free_port
from trainer import optim
from trainer.hparams import MAX_DENSE_PARAMETERS, NORMALIZATIONS, HparamError, dense_parameter_count, input_width
from trainer.model import SyncBatchNorm1d, TabularMLP


def _sync_bn_worker(rank: int, world: int, port: int, out_dir: str) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        full = torch.randn(16, 3) * torch.tensor([1.0, 5.0, 0.2]) + torch.tensor([0.0, 3.0, -1.0])
        # Worker populations differ on purpose: rank 0 holds the rows with the smallest feature 0.
        order = torch.argsort(full[:, 0])
        x = full[order][rank * 8 : (rank + 1) * 8].clone().requires_grad_(True)
        bn = SyncBatchNorm1d(3)
        with torch.no_grad():
            bn.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
        y = bn(x)
        (y * torch.arange(1.0, 4.0)).sum().backward()
        torch.save(
            {"y": y.detach(), "grad": x.grad, "running_mean": bn.running_mean, "order": order},
            Path(out_dir) / f"rank{rank}.pt",
        )
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # about 6 s: two processes that import torch
def test_sync_batch_norm_over_two_gloo_workers_equals_batch_norm_over_the_union(tmp_path: Path) -> None:
    mp.spawn(  # type: ignore[attr-defined,no-untyped-call]
        _sync_bn_worker, args=(2, free_port(), str(tmp_path)), nprocs=2, join=True
    )
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt") for r in range(2))
    torch.manual_seed(0)
    full = torch.randn(16, 3) * torch.tensor([1.0, 5.0, 0.2]) + torch.tensor([0.0, 3.0, -1.0])
    x = full[r0["order"]].clone().requires_grad_(True)
    bn = torch.nn.BatchNorm1d(3)
    with torch.no_grad():
        bn.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
    y = bn(x)
    # Each worker's loss is its half of the sum; DDP would average the parameter gradients, the
    # input gradients are per row.
    (y * torch.arange(1.0, 4.0)).sum().backward()
    torch.testing.assert_close(torch.cat([r0["y"], r1["y"]]), y.detach(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.cat([r0["grad"], r1["grad"]]), x.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(r0["running_mean"], bn.running_mean, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(r1["running_mean"], bn.running_mean, rtol=1e-4, atol=1e-6)


def test_sync_batch_norm_without_a_process_group_is_plain_batch_norm() -> None:
    torch.manual_seed(1)
    x = torch.randn(10, 4)
    sync, plain = SyncBatchNorm1d(4), torch.nn.BatchNorm1d(4)
    torch.testing.assert_close(sync(x), plain(x))
    sync.eval()
    plain.eval()
    torch.testing.assert_close(sync(x), plain(x))


@pytest.mark.parametrize("normalization", NORMALIZATIONS)
def test_mlp_maps_numeric_and_categorical_rows_to_one_logit(normalization: str) -> None:
    model = TabularMLP(3, [4, 2], [8, 4], dropout=0.1, normalization=normalization)
    logits = model(torch.randn(5, 3), torch.tensor([[0, 1], [3, 0], [2, 1], [1, 1], [0, 0]]))
    assert logits.shape == (5,)


def test_unknown_normalization_is_refused_with_the_allowed_values() -> None:
    with pytest.raises(HparamError) as excinfo:
        TabularMLP(3, [], [8], normalization="layer")
    assert excinfo.value.message == 'normalization: "layer" is not one of none, batch, sync_batch.'


@pytest.mark.parametrize("normalization", NORMALIZATIONS)
@pytest.mark.parametrize("hidden_sizes", [[1], [64, 32], [7, 5, 3, 2, 9, 4, 6, 8]])
def test_the_dense_parameter_count_is_the_models_own(normalization: str, hidden_sizes: list[int]) -> None:
    model = TabularMLP(3, [4, 2, 40], hidden_sizes, normalization=normalization, embedding_dim=6)
    width = 3 + 3 + 2 + 6  # 3 numeric, then embeddings of min(6, cardinality // 2 + 1) units
    assert input_width(3, [4, 2, 40], 6) == width  # what the trainer checks before it imports torch
    assert dense_parameter_count(hidden_sizes, input_width=width, normalization=normalization) == sum(
        p.numel() for p in model.body.parameters()
    )


def test_a_model_over_the_parameter_limit_is_refused_on_its_exact_input_width() -> None:
    # (600 + 1) * 2048 + (2048 + 1) * 2048 + 2048 + 1 parameters: under the limit on the widths
    # alone, over it with 600 numeric inputs.
    with pytest.raises(HparamError) as excinfo:
        TabularMLP(600, [], [2048, 2048])
    assert excinfo.value.name == "hidden_sizes"
    assert excinfo.value.message == (
        f'hidden_sizes: "2048,2048" makes 5,429,249 parameters on 600 inputs; at most {MAX_DENSE_PARAMETERS:,} '
        "are allowed."
    )
    TabularMLP(10, [], [2048, 2048])


def test_the_trainers_adam_trains_as_torchs_adam_bit_for_bit() -> None:
    # trainer/optim.py runs Adam's own methods without the wrappers that import torch._dynamo.
    def trained(make: Any) -> tuple[TabularMLP, torch.optim.Optimizer]:
        torch.manual_seed(0)
        model = TabularMLP(3, [4, 2], [8, 4], dropout=0.1, normalization="batch")
        optimizer = make(model.parameters())
        numeric, categorical = torch.randn(32, 3), torch.randint(0, 2, (32, 2))
        target = (torch.rand(32) < 0.4).float()
        for _ in range(25):
            optimizer.zero_grad()
            loss = F.binary_cross_entropy_with_logits(model(numeric, categorical), target)
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
            assert torch.is_grad_enabled()
        return model, optimizer

    model, eager = trained(lambda params: optim.adam(params, lr=0.01))
    assert type(eager) is optim.EagerAdam  # the installed torch wraps the methods as optim.py expects
    reference, adam = trained(lambda params: torch.optim.Adam(params, lr=0.01))
    assert type(adam) is torch.optim.Adam
    for (name, value), (other, expected) in zip(
        model.state_dict().items(), reference.state_dict().items(), strict=True
    ):
        assert name == other
        assert torch.equal(value, expected), name
    state, expected_state = eager.state_dict(), adam.state_dict()
    assert state["param_groups"] == expected_state["param_groups"]
    assert state["state"].keys() == expected_state["state"].keys()
    for index, slots in state["state"].items():
        for key, value in slots.items():
            assert torch.equal(value, expected_state["state"][index][key]), (index, key)
    # A checkpoint's optimizer state loads into either.
    resumed = optim.adam(model.parameters(), lr=0.01)
    resumed.load_state_dict(expected_state)
    assert resumed.state_dict()["param_groups"] == expected_state["param_groups"]
