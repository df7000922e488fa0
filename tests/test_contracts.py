"""The portal and the trainer agree on the versions of the files between them: the trainer defines
its side, the portal's readers and writers are held to it here."""

from __future__ import annotations

import json

from auditportal.fairness import metricsfile, sharding
from auditportal.fairness.tabular import ATTRIBUTE_PREFIX, TARGET_COLUMN
from trainer import bias, data


def test_the_portal_reads_the_metrics_schema_the_trainer_writes() -> None:
    def line(schema: int) -> bytes:
        record = {"schema": schema, "trial": 1, "kind": "validation", "step": 3, "metrics": {"eod": 0.25}}
        return json.dumps(record).encode()

    assert metricsfile.parse_line(line(bias.METRICS_SCHEMA)) == ("validation", 3, {"eod": 0.25})
    assert metricsfile.parse_line(line(bias.METRICS_SCHEMA + 1)) is None


def test_the_portal_writes_the_shard_schema_and_columns_the_trainer_reads() -> None:
    assert sharding.SCHEMA == data.SHARD_SCHEMA
    assert sharding.attribute_column("gender") == f"{ATTRIBUTE_PREFIX}gender"
    assert TARGET_COLUMN == "_target"  # the default trainer/data.py falls back to without metadata
