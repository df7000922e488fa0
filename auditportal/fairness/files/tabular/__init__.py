"""Read, check and summarise a tabular (CSV or Parquet) file with its declared label and sensitive
attributes. Pure pyarrow/numpy, so registration, the shard writer, prediction audits and tests
share one implementation of parsing and normalisation. Work is vectorised: each column is
dictionary-encoded once, the few distinct values are rendered and classified, and the per-row work
is integer codes counted with ``numpy.bincount``.

Modules: ``spec`` (what is declared), ``read`` (parse and hash), ``encode`` (distinct values as
text), ``validate`` (label and attributes), ``profile`` (summaries), ``errors``. Callers outside the
package import the names below from it.
"""

from auditportal.fairness.files.tabular.encode import arrow_scalar, entry_texts, numpy_view
from auditportal.fairness.files.tabular.errors import DatasetError, DecodedSizeError
from auditportal.fairness.files.tabular.profile import (
    ColumnProfile,
    GroupStat,
    Inspection,
    Profile,
    inspect_file,
    load_normalized,
    load_normalized_hashed,
    profile_file,
)
from auditportal.fairness.files.tabular.read import (
    MAX_ROW_BYTES,
    NO_LIMITS,
    RawColumns,
    ReadLimits,
    check_file,
    declared_rows,
    file_sha256,
    identical_columns_warning,
    read_columns,
    repeated_columns_warnings,
    repeated_names,
)
from auditportal.fairness.files.tabular.spec import (
    ATTRIBUTE_PREFIX,
    DEFAULT_UNKNOWN_TOKENS,
    MAX_STORED_KEY,
    MAX_STORED_NAME,
    SUPPORTED_SUFFIXES,
    TARGET_COLUMN,
    AttributeInfo,
    Codes,
    DatasetSpec,
    FeatureInfo,
    FileFormat,
    check_file_name,
    parse_unknown_tokens,
)
from auditportal.fairness.files.tabular.validate import (
    LabelledColumns,
    attribute_groups,
    decode_labelled,
    integer_label,
    read_labelled_columns,
)

__all__ = [
    "ATTRIBUTE_PREFIX",
    "DEFAULT_UNKNOWN_TOKENS",
    "MAX_ROW_BYTES",
    "MAX_STORED_KEY",
    "MAX_STORED_NAME",
    "NO_LIMITS",
    "SUPPORTED_SUFFIXES",
    "TARGET_COLUMN",
    "AttributeInfo",
    "Codes",
    "ColumnProfile",
    "DatasetError",
    "DatasetSpec",
    "DecodedSizeError",
    "FeatureInfo",
    "FileFormat",
    "GroupStat",
    "Inspection",
    "LabelledColumns",
    "Profile",
    "RawColumns",
    "ReadLimits",
    "arrow_scalar",
    "attribute_groups",
    "check_file",
    "check_file_name",
    "declared_rows",
    "decode_labelled",
    "entry_texts",
    "file_sha256",
    "identical_columns_warning",
    "inspect_file",
    "integer_label",
    "load_normalized",
    "load_normalized_hashed",
    "numpy_view",
    "parse_unknown_tokens",
    "profile_file",
    "read_columns",
    "read_labelled_columns",
    "repeated_columns_warnings",
    "repeated_names",
]
