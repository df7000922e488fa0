"""What a caller declares about a tabular file (label, positive value, sensitive attributes, unknown
tokens, features), the names of the normalised columns, and the checks on a file's name."""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from auditportal.fairness.files.tabular.errors import DatasetError, escape, quote

DEFAULT_UNKNOWN_TOKENS: tuple[str, ...] = ("", "nan", "-1", "unknown")
SUPPORTED_SUFFIXES = (".csv", ".parquet", ".pq")
MAX_FILE_NAME_LENGTH = 200
TARGET_COLUMN = "_target"
ATTRIBUTE_PREFIX = "_attr."
FileFormat = Literal["csv", "parquet"]
Codes = npt.NDArray[np.int32]

# The longest name the database stores for what a registered file declares: the label column and
# positive value (datasets DatasetVersion), a sensitive attribute's name (SensitiveAttribute), and
# every metric the trainer reports about it (experiments MetricPoint.name, .attribute, .group).
# The keys in GroupSummary and TrialVerdict have 2 * MAX_STORED_NAME + 1 (two names and the "&"
# of an intersection). tests/datasets/test_stored_limits.py holds these to the models' max_length.
MAX_STORED_NAME = 255
MAX_STORED_KEY = 2 * MAX_STORED_NAME + 1
# The longest metric name the trainer writes about a group (trainer/README.md), with room for
# ranks up to 99 (the portal launches one slot per trial). Attribute and group parts are escaped
# as the trainer escapes them (metric_part); a test holds this to trainer/groups.py's own names.
LONGEST_GROUP_METRIC = "worker_share/{attribute}/{group}/rank99"
LONGEST_ATTRIBUTE_METRIC = "worker_share/{attribute}/unknown/rank99"


@dataclass(frozen=True)
class DatasetSpec:
    label: str
    positive: str
    attributes: tuple[str, ...]
    unknown_tokens: tuple[str, ...] = DEFAULT_UNKNOWN_TOKENS
    features: tuple[str, ...] | None = None
    max_groups: int = 50


@dataclass(frozen=True)
class FeatureInfo:
    name: str
    kind: Literal["numeric", "categorical"]


@dataclass(frozen=True)
class AttributeInfo:
    name: str
    groups: tuple[str, ...]
    unknown_count: int


def metric_part(parts: Sequence[str]) -> str:
    """An attribute or group as the trainer writes it inside a metric name (trainer/groups.py
    metric_key): each name with "%", "/" and "&" percent-encoded, joined by "&"."""
    return "&".join(part.replace("%", "%25").replace("/", "%2F").replace("&", "%26") for part in parts)


def group_metric_length(attribute: Sequence[str], group: Sequence[str]) -> int:
    """The length of the longest metric name the trainer writes about this group of this attribute
    (or, for an intersection, these names and values)."""
    return len(LONGEST_GROUP_METRIC.format(attribute=metric_part(attribute), group=metric_part(group)))


def attribute_metric_length(attribute: Sequence[str]) -> int:
    return len(LONGEST_ATTRIBUTE_METRIC.format(attribute=metric_part(attribute)))


def parse_unknown_tokens(text: str) -> tuple[str, ...]:
    """Comma-separated unknown tokens as a user types them: empty values are always unknown; the
    other tokens are stripped, deduplicated and sorted."""
    tokens = [token.strip() for token in text.split(",")]
    return ("", *sorted({token for token in tokens if token}, key=str.lower))


def check_file_name(name: str) -> str:
    shown = escape(name) if name else "(no file name)"

    def reject(message: str) -> DatasetError:
        return DatasetError(message, file=shown)

    if not name.strip():
        raise reject("the file name is empty; upload a file with a name such as 'credit.csv'")
    if len(name) > MAX_FILE_NAME_LENGTH:
        raise reject(
            f"the file name is {len(name)} characters long, more than the limit of "
            f"{MAX_FILE_NAME_LENGTH}; rename the file"
        )
    control = sorted({ch for ch in name if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp")})
    if control:
        listed = ", ".join(ascii(ch) for ch in control)
        raise reject(f"the file name contains control characters ({listed}); rename the file")
    if "/" in name or "\\" in name:
        raise reject(
            "the file name contains a path separator ('/' or '\\'); upload the file under a plain "
            "name such as 'credit.csv'"
        )
    if ".." in name:
        raise reject("the file name contains '..'; rename the file")
    if name.startswith("."):
        raise reject("the file name starts with a dot (a hidden file); rename the file")
    if not name.lower().endswith(SUPPORTED_SUFFIXES):
        raise reject(unsupported_suffix_message(name))
    return name


def unsupported_suffix_message(name: str) -> str:
    suffix = "." + name.rsplit(".", 1)[-1] if "." in name else ""
    what = f"unsupported file type {quote(suffix)}" if suffix else "the file name has no extension"
    return f"{what}; upload a .csv file (comma-separated, UTF-8) or a .parquet file"


def check_spec(spec: DatasetSpec, display_name: str) -> None:
    def reject(message: str, column: str | None = None) -> DatasetError:
        return DatasetError(message, file=display_name, column=column)

    if not spec.attributes:
        raise reject("declare at least one sensitive attribute (e.g. gender, race, age group)")
    for kind, names in (("sensitive attribute", spec.attributes), ("feature", spec.features or ())):
        for name, count in Counter(names).items():
            if count > 1:
                raise reject(f"{quote(name)} is declared {count} times as a {kind}", name)
    if spec.label in spec.attributes:
        raise reject(
            f"{quote(spec.label)} is declared as both the label and a sensitive attribute; "
            "the label must be a separate column",
            spec.label,
        )
    if spec.features is not None and spec.label in spec.features:
        raise reject(
            f"{quote(spec.label)} is declared as both the label and a feature; a model must not be "
            "trained on its own label",
            spec.label,
        )
    if spec.max_groups < 1:
        raise reject(f"the group limit must be at least 1, not {spec.max_groups}")


def needed_columns(spec: DatasetSpec) -> list[str] | None:
    if spec.features is None:
        return None
    return list(dict.fromkeys([*spec.features, spec.label, *spec.attributes]))
