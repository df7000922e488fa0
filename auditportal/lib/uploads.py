from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from django import forms
from django.conf import settings
from django.core.files.uploadedfile import TemporaryUploadedFile, UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, SkipFile, TemporaryFileUploadHandler
from django.http import HttpRequest

from auditportal.lib.env import human_size


@dataclass(frozen=True)
class RejectedUpload:
    field_name: str
    file_name: str
    received_bytes: int
    limit_bytes: int


class SizeLimitedUploadHandler(FileUploadHandler):
    """Stops storing a file as soon as it passes DATASET_MAX_UPLOAD_BYTES.

    Placed before Django's TemporaryFileUploadHandler: uploads stream to disk chunk by chunk and an
    oversized one is dropped (its temporary file deleted) without ever being held whole. The view
    reads ``request.rejected_uploads`` to tell the user which file was too large.
    """

    def new_file(self, field_name: str, file_name: str, *args: object, **kwargs: object) -> None:
        super().new_file(field_name, file_name, *args, **kwargs)  # type: ignore[arg-type]
        self._received = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self._received = start + len(raw_data)
        limit = settings.DATASET_MAX_UPLOAD_BYTES
        if self._received > limit:
            rejected = getattr(self.request, "rejected_uploads", [])
            rejected.append(
                RejectedUpload(
                    field_name=str(self.field_name),
                    file_name=str(self.file_name),
                    received_bytes=self._received,
                    limit_bytes=limit,
                )
            )
            self.request.rejected_uploads = rejected  # type: ignore[union-attr]
            raise SkipFile
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None


class HashingTemporaryFileUploadHandler(TemporaryFileUploadHandler):
    """Django's temporary-file handler that also takes the SHA-256 of the bytes as they are written.

    Each chunk is hashed on its way to disk, while the rest of the upload is still arriving, so
    readers of the finished file take the digest from :func:`received_sha256` instead of reading the
    whole file again to hash it.
    """

    def new_file(self, *args: object, **kwargs: object) -> None:
        super().new_file(*args, **kwargs)  # type: ignore[arg-type]
        self._digest = hashlib.sha256()

    def receive_data_chunk(self, raw_data: bytes, start: int) -> None:
        self._digest.update(raw_data)
        super().receive_data_chunk(raw_data, start)

    def file_complete(self, file_size: int) -> TemporaryUploadedFile:
        super().file_complete(file_size)
        self.file.sha256 = self._digest.hexdigest()  # type: ignore[attr-defined]
        return self.file


def received_sha256(uploaded: UploadedFile[Any]) -> str | None:
    """The SHA-256 taken while ``uploaded`` streamed in; None when another handler stored it."""
    digest = getattr(uploaded, "sha256", None)
    return digest if isinstance(digest, str) else None


def report_rejected_uploads(request: HttpRequest, form: forms.Form) -> bool:
    """Put an error on ``form`` for every file the handler dropped; True when there was one."""
    rejected: list[RejectedUpload] = getattr(request, "rejected_uploads", [])
    for item in rejected:
        form.add_error(
            item.field_name if item.field_name in form.fields else None,
            f"{item.file_name}: the file is larger than the {human_size(item.limit_bytes)} limit "
            f"(DATASET_MAX_UPLOAD_SIZE); nothing was stored.",
        )
    return bool(rejected)
