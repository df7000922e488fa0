"""Sharding: a version's stored file, checked against its registered hash, written as stratified
shards for training."""

from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings

from auditportal.accounts.models import User
from auditportal.datasets.models import DatasetVersion, IntegrityPurpose
from auditportal.datasets.services.integrity import dataset_version_check_integrity, integrity_record
from auditportal.fairness.files import sharding, tabular
from auditportal.fairness.files.tabular import DatasetSpec, FeatureInfo


def dataset_version_shard(
    *,
    version: DatasetVersion,
    parts: int,
    out_dir: Path | None = None,
    seed: int = 0,
    overwrite: bool = False,
    actor: User | None = None,
) -> tuple[Path, dict[str, object]]:
    """Write the version's stored file as ``parts`` shards whose manifest carries its SHA-256.

    Refused with DatasetIntegrityError when the stored file no longer has its registered hash: it
    is checked before reading, and hashed again beside the read, so the manifest's hash is the
    hash of the bytes the shards came from. Must run outside any transaction (it records checks).
    """
    dataset_version_check_integrity(version=version, actor=actor, purpose=IntegrityPurpose.SHARD)
    spec = dataset_spec_for(version)
    table, read_sha256 = tabular.load_normalized_hashed(version.path, spec, display_name=version.original_name)
    if read_sha256 != version.sha256:
        # Changed between the check and the read.
        integrity_record(version=version, actor=actor, purpose=IntegrityPurpose.SHARD, observed=read_sha256)
    target = out_dir or shard_dir_default(version=version, parts=parts, seed=seed)
    shard_spec = sharding.ShardSpec(
        label_column=version.label_column,
        positive=version.positive_value,
        features=tuple(FeatureInfo(name=f["name"], kind=f["kind"]) for f in version.features),
        attributes=tuple(
            sharding.AttributeSpec(
                name=attribute.name,
                groups=tuple(attribute.groups),
                unknown_tokens=tuple(version.unknown_tokens),
            )
            for attribute in version.attributes.all()
        ),
        dataset={"version_id": version.pk, "name": version.dataset.name, "sha256": read_sha256},
    )
    manifest = sharding.write_shards(table, shard_spec, parts=parts, out_dir=target, seed=seed, overwrite=overwrite)
    return target, manifest


def shards_match_version(*, out_dir: Path, version: DatasetVersion) -> bool:
    """Whether ``out_dir`` holds complete, consistent shards written from this version's registered bytes."""
    try:
        manifest = json.loads((out_dir / sharding.MANIFEST_NAME).read_text(encoding="utf-8"))
        dataset = manifest["dataset"]
        if dataset["sha256"] != version.sha256 or dataset["version_id"] != version.pk:
            return False
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return not sharding.check_shards(out_dir)


def shard_dir_default(*, version: DatasetVersion, parts: int, seed: int) -> Path:
    return Path(settings.SHARD_DIR) / f"version-{version.pk}-k{parts}-seed{seed}"


def dataset_spec_for(version: DatasetVersion) -> DatasetSpec:
    return DatasetSpec(
        label=version.label_column,
        positive=version.positive_value,
        attributes=tuple(version.attributes.order_by("position").values_list("name", flat=True)),
        unknown_tokens=tuple(version.unknown_tokens),
        features=tuple(f["name"] for f in version.features),
        max_groups=settings.DATASET_MAX_GROUPS,
    )
