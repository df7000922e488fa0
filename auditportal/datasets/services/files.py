"""The store's files: where registered and staged files live, how a file is put there, and what
reading an uploaded file may cost."""

from __future__ import annotations

import shutil
from pathlib import Path

from django.conf import settings

from auditportal.fairness.files import tabular
from auditportal.fairness.files.tabular import DatasetError
from auditportal.fairness.text.sizes import human_size
from auditportal.lib.files import FILE_MODE, private_dir


def storage_root() -> Path:
    return private_dir(settings.DATASET_STORAGE_DIR)


def dataset_read_limits() -> tabular.ReadLimits:
    """What reading an uploaded file may cost besides its size (DATASET_MAX_ROWS,
    DATASET_MAX_DECOMPRESSED_SIZE): a Parquet file is checked against its metadata before any of its
    data is read."""
    return tabular.ReadLimits(
        rows=settings.DATASET_MAX_ROWS, decompressed_bytes=settings.DATASET_MAX_DECOMPRESSED_BYTES
    )


def check_size(path: Path, display_name: str) -> int:
    size = path.stat().st_size
    limit = settings.DATASET_MAX_UPLOAD_BYTES
    if size > limit:
        raise DatasetError(
            f"the file is {human_size(size)}, over the {human_size(limit)} limit (DATASET_MAX_UPLOAD_SIZE)",
            file=display_name,
        )
    return size


def place(source: Path, target: Path, *, move: bool) -> None:
    """Put a file into the store without ever exposing a half-written file under its final name."""
    private_dir(target.parent)
    partial = target.with_name(f".{target.name}.partial")
    if move:
        try:
            source.rename(partial)
        except OSError:
            shutil.copyfile(source, partial)
            source.unlink()
    else:
        shutil.copyfile(source, partial)
    # A moved file keeps its mode: the store's files are 0600 whatever their source was.
    partial.chmod(FILE_MODE)
    partial.rename(target)


def remove_tree(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
