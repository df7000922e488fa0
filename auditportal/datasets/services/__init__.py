"""The datasets app's writes, one module per job; callers import them from here.

files           the store: where files live, how one is put there, what reading one may cost
registration    a checked file becomes the next version of a dataset (dataset_version_register)
staged_uploads  the browser's flow: upload, profile (worker), declare, register (worker)
integrity       the stored file hashed again against its registered SHA-256, each check recorded
retirement      a version taken out of use for new experiments
stewards        administrators change a dataset's stewards

Who may do what (registering, owning a dataset, retiring, checking, managing stewards) is
datasets/rules.py, which these modules and the pages share.
shards          a version written as stratified shards for training
"""

from __future__ import annotations

from auditportal.datasets.services.files import dataset_read_limits
from auditportal.datasets.services.integrity import (
    DatasetIntegrityError,
    dataset_version_check_integrity,
    integrity_failure_message,
)
from auditportal.datasets.services.registration import (
    REGISTER_STEP_INSPECT,
    REGISTER_STEP_SAVE,
    dataset_name_check,
    dataset_version_register,
)
from auditportal.datasets.services.retirement import dataset_version_retire
from auditportal.datasets.services.shards import (
    dataset_spec_for,
    dataset_version_shard,
    shard_dir_default,
    shards_match_version,
)
from auditportal.datasets.services.staged_uploads import (
    PROFILE_STEP,
    STAGED_UPLOAD_LIFETIME,
    STAGED_WORK_STALE,
    WAITING_FOR_WORKER,
    StagedUploadBusy,
    declaration_as_json,
    declaration_spec,
    staged_upload_create,
    staged_upload_declare,
    staged_upload_discard,
    staged_upload_profile,
    staged_upload_register,
    staged_upload_register_queued,
    staged_uploads_expire,
)
from auditportal.datasets.services.stewards import dataset_steward_add, dataset_steward_remove

__all__ = [
    "PROFILE_STEP",
    "REGISTER_STEP_INSPECT",
    "REGISTER_STEP_SAVE",
    "STAGED_UPLOAD_LIFETIME",
    "STAGED_WORK_STALE",
    "WAITING_FOR_WORKER",
    "DatasetIntegrityError",
    "StagedUploadBusy",
    "dataset_name_check",
    "dataset_read_limits",
    "dataset_spec_for",
    "dataset_steward_add",
    "dataset_steward_remove",
    "dataset_version_check_integrity",
    "dataset_version_register",
    "dataset_version_retire",
    "dataset_version_shard",
    "declaration_as_json",
    "declaration_spec",
    "integrity_failure_message",
    "shard_dir_default",
    "shards_match_version",
    "staged_upload_create",
    "staged_upload_declare",
    "staged_upload_discard",
    "staged_upload_profile",
    "staged_upload_register",
    "staged_upload_register_queued",
    "staged_uploads_expire",
]
