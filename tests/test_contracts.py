"""The portal and the trainer agree on the versions of the files between them: the trainer defines
its side, the portal's readers and writers are held to it here."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from auditportal.fairness.files import intersections, metricsfile, sharding
from auditportal.fairness.files.tabular import ATTRIBUTE_PREFIX, TARGET_COLUMN
from auditportal.fairness.statistics import attributions
from trainer import attribute, bias, data


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


def test_the_portal_reads_the_attributions_schema_the_trainer_writes() -> None:
    assert attributions.ATTRIBUTIONS_SCHEMA == attribute.ATTRIBUTIONS_SCHEMA
    assert attributions.CODES == "group_codes__"


# Names made of the characters the encodings escape, and others.
NAMES = st.text(alphabet="ab&%/2 ", min_size=1, max_size=6)


@given(parts=st.lists(NAMES, min_size=1, max_size=3))
def test_the_trainer_keys_attributes_and_groups_as_the_portal_does(parts: list[str]) -> None:
    # bias_stats.json keys (the trainer's copy) against fairness/files/intersections.py.
    assert bias.stats_key(parts) == intersections.attribute_key(parts)
    assert bias.stats_group_key(parts) == intersections.group_key(parts)


@given(columns=st.lists(NAMES, min_size=1, max_size=3), data=st.data())
def test_the_portal_decodes_the_trainers_metric_names_into_its_keys(columns: list[str], data: st.DataObject) -> None:
    values = data.draw(st.lists(NAMES, min_size=len(columns), max_size=len(columns)))
    name = f"count/{bias.metric_key(columns)}/{bias.metric_key(values)}/tp"
    assert metricsfile.metric_group(name) == (intersections.attribute_key(columns), intersections.group_key(values))
