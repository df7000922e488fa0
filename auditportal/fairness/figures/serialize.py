"""A figure as the JSON the page's plotly.js draws, and that JSON kept for the figures the pages draw
again and again from the same evidence."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import plotly.graph_objects as go

# How many figures ``kept_figure_json`` keeps, the latest used: a figure is some tens of kB of JSON text,
# a forest plot of a large verdict document a few hundred at most.
KEPT_FIGURES = 128

_kept: OrderedDict[str, str | None] = OrderedDict()
_kept_lock = threading.Lock()


def figure_json(figure: go.Figure | dict[str, Any]) -> dict[str, Any]:
    """``{"data": [...], "layout": {...}}`` with numpy arrays as lists and NaN as null.

    A figure written as that JSON already (the deployment page's, figures/monitoring.py) is returned
    as it is.

    plotly's own encoder does the conversion; the round trip through text gives plain Python
    values the JSON response and the canonical JSON of the evidence can take.
    """
    if isinstance(figure, dict):
        return figure
    from plotly.utils import PlotlyJSONEncoder

    parsed: dict[str, Any] = json.loads(json.dumps(figure.to_plotly_json(), cls=PlotlyJSONEncoder))
    return {"data": parsed.get("data", []), "layout": parsed.get("layout", {})}


def kept_figure_json(
    build: Callable[..., go.Figure | dict[str, Any] | None], /, *args: Any, kept_as: str | None = None, **kwargs: Any
) -> dict[str, Any] | None:
    """``figure_json(build(*args, **kwargs))``, or None when ``build`` draws nothing: made once per
    process for the same builder and arguments, and kept for the latest ``KEPT_FIGURES``; each caller
    gets its own copy.

    For the pages that draw a figure of evidence that never changes (a frozen document, a dataset
    version's counts) on every visit: building it through plotly's objects takes tenths of a second,
    parsing the kept text a millisecond. ``build`` must be a function of its arguments alone, and they
    plain data (mappings, sequences, numbers, text, dataclasses): their canonical JSON is the key, unless
    the caller names them with ``kept_as`` (a frozen document's SHA-256), which saves serialising them.
    """
    key = _key(build, args, kwargs) if kept_as is None else f"{build.__module__}.{build.__qualname__}:{kept_as}"
    with _kept_lock:
        if key in _kept:
            _kept.move_to_end(key)
            text = _kept[key]
            return None if text is None else _parsed(text)
    figure = build(*args, **kwargs)
    drawn = None if figure is None else figure_json(figure)
    text = None if drawn is None else json.dumps(drawn)
    with _kept_lock:
        _kept[key] = text
        while len(_kept) > KEPT_FIGURES:
            _kept.popitem(last=False)
    return None if text is None else _parsed(text)


def _key(build: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    named = f"{build.__module__}.{build.__qualname__}"
    text = json.dumps([named, args, kwargs], sort_keys=True, separators=(",", ":"), default=_plain)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _plain(value: Any) -> Any:
    import numpy as np

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"dataclass": type(value).__qualname__, **dataclasses.asdict(value)}
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"kept_figure_json: {type(value).__name__} is not plain data, and no key")


def _parsed(text: str) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(text)
    return parsed
