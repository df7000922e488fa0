"""The trainer's optimizer: torch's Adam, run without importing ``torch._dynamo``.

torch marks its optimizers' methods for ``torch.compile``: ``Optimizer.add_param_group``,
``zero_grad``, ``state_dict`` and ``load_state_dict`` are wrapped by ``torch._disable_dynamo`` and
``Adam.step`` by ``_use_grad_for_differentiable``, and each wrapper imports ``torch._dynamo`` (and
sympy with it) on its first call: 1.2 to 1.9 s of CPU, a third of a short one-process trial, in a
trainer that never compiles (a trial of several processes imports it anyway: DistributedDataParallel
asks torch._dynamo for its reducer mode). :func:`adam` returns an :class:`EagerAdam`, which calls the same
functions without those wrappers (``__wrapped__``) and turns gradients off around ``step`` as the
wrapper does: the same arithmetic, parameters and state dict as ``torch.optim.Adam`` (held to it bit
for bit by tests/trainer/test_model.py). Where the installed torch wraps them otherwise, :func:`adam`
returns ``torch.optim.Adam`` itself, which is only slower to start.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

# What each method is wrapped in: the wrapper's code's qualified name (torch 2.13's torch/_compile.py
# and torch/optim/optimizer.py). Code objects name it from Python 3.11 on: on 3.10 (Determined's
# trainer image) none is found, and adam() gives torch.optim.Adam.
_WRAPPERS = {
    "step": "_use_grad_for_differentiable.<locals>._use_grad",
    "add_param_group": "_disable_dynamo.<locals>.inner",
    "zero_grad": "_disable_dynamo.<locals>.inner",
    "state_dict": "_disable_dynamo.<locals>.inner",
    "load_state_dict": "_disable_dynamo.<locals>.inner",
}


def _unwrapped(method: Any, wrapper: str) -> Callable[..., Any] | None:
    """The function ``wrapper`` wraps in ``method``, through other wrappers (``functools.wraps``) such
    as the profiling hook torch puts on ``step`` once an optimizer of the class exists; None if it is
    not there."""
    for _ in range(4):
        inner = getattr(method, "__wrapped__", None)
        if inner is None:
            return None
        if getattr(getattr(method, "__code__", None), "co_qualname", None) == wrapper:
            return inner if callable(inner) else None
        method = inner
    return None


def _raw_methods() -> dict[str, Callable[..., Any]]:
    """Each of _WRAPPERS' methods without its wrapper; empty unless every one was found."""
    found = {name: _unwrapped(getattr(torch.optim.Adam, name), wrapper) for name, wrapper in _WRAPPERS.items()}
    return {name: raw for name, raw in found.items() if raw is not None} if all(found.values()) else {}


_RAW = _raw_methods()


class EagerAdam(torch.optim.Adam):
    """``torch.optim.Adam`` whose methods skip the wrappers that import ``torch._dynamo`` (see the module);
    made by :func:`adam`, which knows whether the installed torch allows it."""

    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        enabled = torch.is_grad_enabled()
        try:
            torch.set_grad_enabled(self.defaults["differentiable"])
            result: float | None = _RAW["step"](self, closure)
        finally:
            torch.set_grad_enabled(enabled)
        return result

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        _RAW["add_param_group"](self, param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        _RAW["zero_grad"](self, set_to_none)

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = _RAW["state_dict"](self)
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        _RAW["load_state_dict"](self, state_dict)


def adam(params: Iterable[torch.nn.Parameter], *, lr: float) -> torch.optim.Adam:
    """Adam over ``params`` at learning rate ``lr``: an :class:`EagerAdam` where the installed torch
    wraps the methods as expected, else ``torch.optim.Adam``."""
    if _RAW:
        return EagerAdam(params, lr=lr)
    return torch.optim.Adam(params, lr=lr)
