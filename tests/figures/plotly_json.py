"""Reading a figure's JSON in tests: plotly writes numpy arrays as typed arrays
(``{"dtype": "f4", "bdata": "<base64>", "shape": "4, 2"}``, which plotly.js reads); these become
plain lists again, NaN as None, single precision rounded to 6 decimals."""

from __future__ import annotations

import base64
import math
from typing import Any

import numpy as np


def decoded(value: Any) -> Any:
    """``value`` with every typed array in it as a (nested) list."""
    if isinstance(value, dict):
        if set(value) >= {"dtype", "bdata"}:
            array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
            if "shape" in value:
                array = array.reshape([int(part) for part in str(value["shape"]).split(",")])
            return _plain(array.tolist(), array.dtype.kind == "f")
        return {key: decoded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [decoded(item) for item in value]
    return value


def _plain(value: Any, floats: bool) -> Any:
    if isinstance(value, list):
        return [_plain(item, floats) for item in value]
    if floats:
        return None if math.isnan(value) else round(value, 6)
    return value
