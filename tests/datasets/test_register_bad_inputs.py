"""Every kind of bad file is refused by the registry with a message naming what is wrong, and
nothing is left behind: no stored file, no dataset, version, attribute, summary or activity row."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.activity.models import Event
from auditportal.datasets import services
from auditportal.datasets.models import Dataset, DatasetVersion, GroupSummary, SensitiveAttribute
from auditportal.fairness.files.tabular import DatasetError, DatasetSpec

GOOD_HEADER = "income,gender,approved\n"
SPEC = DatasetSpec(label="approved", positive="1", attributes=("gender",))


def _parquet_bytes() -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table({"income": [1, 2], "gender": ["f", "m"], "approved": [1, 0]}), sink)
    return sink.getvalue()


CASES: list[tuple[str, str, Callable[[], bytes], DatasetSpec, list[str]]] = [
    ("empty file", "a.csv", lambda: b"", SPEC, ["a.csv", "empty"]),
    ("header only", "a.csv", lambda: GOOD_HEADER.encode(), SPEC, ["a.csv", "no data rows"]),
    ("parquet named csv", "a.csv", _parquet_bytes, SPEC, ["a.csv", "Parquet"]),
    ("csv named parquet", "a.parquet", lambda: (GOOD_HEADER + "1,f,1\n").encode(), SPEC, ["a.parquet"]),
    ("semicolons", "a.csv", lambda: b"income;gender;approved\n1;f;1\n", SPEC, ["a.csv", "';'"]),
    ("latin-1", "a.csv", lambda: (GOOD_HEADER + "1,f,1\n2,m\xe9,0\n").encode("latin-1"), SPEC,
     ["a.csv", "row 2", "UTF-8"]),
    ("short row", "a.csv", lambda: (GOOD_HEADER + "1,f,1\n2,m\n").encode(), SPEC, ["a.csv", "row 2"]),
    ("duplicate columns", "a.csv", lambda: b"income,gender,gender,approved\n1,f,m,1\n", SPEC, ["a.csv", "'gender'"]),
    ("missing column", "a.csv", lambda: (GOOD_HEADER + "1,f,1\n").encode(),
     DatasetSpec(label="approved", positive="1", attributes=("race",)), ["a.csv", "'race'"]),
    ("non-binary label", "a.csv", lambda: (GOOD_HEADER + "1,f,1\n2,m,0\n3,f,2\n").encode(), SPEC,
     ["a.csv", "row 3", "column 'approved'", "'2'"]),
    ("positive value absent", "a.csv", lambda: (GOOD_HEADER + "1,f,0\n2,m,0\n").encode(),
     DatasetSpec(label="approved", positive="yes", attributes=("gender",)), ["a.csv", "'yes'"]),
    ("too many groups", "a.csv", lambda: (GOOD_HEADER + "".join(f"{i},g{i},{i % 2}\n" for i in range(60))).encode(),
     SPEC, ["a.csv", "'gender'", "60", "50"]),
    ("hostile name", "..evil.csv", lambda: (GOOD_HEADER + "1,f,1\n").encode(), SPEC, [".."]),
    ("hidden file", ".env.csv", lambda: (GOOD_HEADER + "1,f,1\n").encode(), SPEC, ["dot"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("file_name", "content", "spec", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_a_bad_file_is_refused_with_a_precise_message_and_nothing_is_written(
    alice: User,
    dataset_storage: Path,
    tmp_path: Path,
    file_name: str,
    content: Callable[[], bytes],
    spec: DatasetSpec,
    expected: list[str],
) -> None:
    source = tmp_path / "incoming" / file_name
    source.parent.mkdir()
    source.write_bytes(content())
    with pytest.raises(DatasetError) as caught:
        services.dataset_version_register(user=alice, source=source, original_name=file_name, name="x", spec=spec)
    message = str(caught.value)
    for part in expected:
        assert part in message, f"{part!r} not in {message!r}"
    assert source.read_bytes() == content(), "the steward's own file must be left untouched"
    _assert_nothing_written(dataset_storage)


def test_an_oversized_file_is_refused_and_nothing_is_written(
    alice: User, dataset_storage: Path, tmp_path: Path, settings: SettingsWrapper
) -> None:
    settings.DATASET_MAX_UPLOAD_BYTES = 64
    source = tmp_path / "big.csv"
    source.write_text(GOOD_HEADER + "1,f,1\n" * 40)
    with pytest.raises(DatasetError, match=r"big\.csv: the file is 2\d\d bytes, over the 64 bytes limit"):
        services.dataset_version_register(user=alice, source=source, original_name="big.csv", name="x", spec=SPEC)
    _assert_nothing_written(dataset_storage)


def _assert_nothing_written(store: Path) -> None:
    stored_files = [p for p in store.rglob("*") if p.is_file()] if store.exists() else []
    assert stored_files == []
    assert not Dataset.objects.exists()
    assert not DatasetVersion.objects.exists()
    assert not SensitiveAttribute.objects.exists()
    assert not GroupSummary.objects.exists()
    # Only the fairness policy's seed (written at migrate) may be in the log: nothing about datasets.
    assert not Event.objects.filter(target_type__startswith="datasets.").exists()
