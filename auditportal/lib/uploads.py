"""Upload handlers (FILE_UPLOAD_HANDLERS, in this order) and what views need of them.

``UploadGuardHandler`` decides whether this request may send files at all, before a byte of the body
is read; ``SizeLimitedUploadHandler`` drops a file as soon as it passes the size limit;
``HashingTemporaryFileUploadHandler`` streams the rest to a temporary file under
FILE_UPLOAD_TEMP_DIR, hashing it on the way.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from django import forms
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.core.files.uploadedfile import TemporaryUploadedFile, UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, SkipFile, TemporaryFileUploadHandler
from django.http import HttpRequest

from auditportal.fairness.text.sizes import human_size

logger = logging.getLogger(__name__)

V = TypeVar("V")


@dataclass(frozen=True)
class UploadPolicy:
    allows: Callable[[Any], bool]  # given the authenticated user
    who: str  # "a data steward": who may upload, for the refusal
    # The setting that bounds a file's size here (its value in bytes); DATASET_MAX_UPLOAD_BYTES by default.
    limit_setting: str = "DATASET_MAX_UPLOAD_BYTES"


def accepts_uploads(
    allows: Callable[[Any], bool], *, who: str, limit_setting: str = "DATASET_MAX_UPLOAD_BYTES"
) -> Callable[[V], V]:
    """Mark a view (function or class) as taking uploaded files from authenticated users that
    ``allows`` accepts, each at most the setting ``limit_setting`` bytes. Every other view refuses
    files (UploadGuardHandler)."""

    def mark(view: V) -> V:
        view.upload_policy = UploadPolicy(allows, who, limit_setting)  # type: ignore[attr-defined]
        return view

    return mark


class UploadRefused(PermissionDenied):
    """A multipart body refused before any of its files was stored (403)."""


def upload_policy_of(request: HttpRequest) -> UploadPolicy | None:
    """The policy of the view the request was routed to (functools.wraps carries it through the
    decorators; DRF's and Django's as_view keep the class as ``view_class``)."""
    match = getattr(request, "resolver_match", None)
    if match is None:
        return None
    for holder in (match.func, getattr(match.func, "view_class", None)):
        policy = getattr(holder, "upload_policy", None)
        if isinstance(policy, UploadPolicy):
            return policy
    return None


class UploadGuardHandler(FileUploadHandler):
    """Refuses files from anyone who may not upload them here, before anything is written.

    First in FILE_UPLOAD_HANDLERS. Django parses a multipart body only when something first reads
    ``request.POST`` or ``request.FILES`` (the CSRF middleware's process_view, DRF's authentication,
    the view), all of which run after the session and authentication middleware: ``request.user``
    is known (for DRF, the user its authentication found). ``handle_raw_input`` runs before the
    parser reads a byte of the body:

    - an anonymous request's multipart body is refused whole (403), unread;
    - so is an authenticated one at a view marked with :func:`accepts_uploads` whose policy refuses
      the user;
    - at any other view its form fields are read (at most DATA_UPLOAD_MAX_MEMORY_SIZE) and its first
      file part refused, before that file's first chunk.
    """

    policy: UploadPolicy | None = None

    def handle_raw_input(
        self,
        input_data: Any,
        META: dict[str, Any],
        content_length: int,
        boundary: str,
        encoding: str | None = None,
    ) -> None:
        user = getattr(self.request, "user", None)
        self.policy = upload_policy_of(self.request) if self.request is not None else None
        if user is None or not user.is_authenticated:
            self._refuse("Log in before sending files; nothing was stored.")
        if self.policy is not None and not self.policy.allows(user):
            self._refuse(f"Only {self.policy.who} can upload files here; nothing was stored.")

    def new_file(self, *args: Any, **kwargs: Any) -> None:
        super().new_file(*args, **kwargs)
        if self.policy is None:
            self._refuse("This address takes no uploaded files; nothing was stored.")

    def _refuse(self, message: str) -> NoReturn:
        # Leave the request with an empty form, as Django does after a malformed body, so that what
        # answers the refusal (the 403 page reads the CSRF token) does not parse the body again.
        mark_empty = getattr(self.request, "_mark_post_parse_error", None)
        if mark_empty is not None:
            mark_empty()
        raise UploadRefused(message)

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None


def stale_temporary_files_remove(*, older_than: timedelta, now: datetime | None = None) -> int:
    """Delete temporary upload files (Django's ``*.upload*`` under FILE_UPLOAD_TEMP_DIR) untouched for
    ``older_than``: a web process killed during an upload leaves its file behind. The count removed."""
    folder = Path(settings.FILE_UPLOAD_TEMP_DIR)
    cutoff = (now.timestamp() if now is not None else time.time()) - older_than.total_seconds()
    removed = 0
    try:
        entries = list(folder.iterdir())
    except FileNotFoundError:
        return 0
    for entry in entries:
        if ".upload" not in entry.name:
            continue
        try:
            info = entry.lstat()
            if entry.is_file() and not entry.is_symlink() and info.st_mtime < cutoff:
                entry.unlink()
                removed += 1
        except FileNotFoundError:
            continue
    return removed


@dataclass(frozen=True)
class RejectedUpload:
    field_name: str
    file_name: str
    received_bytes: int
    limit_bytes: int
    limit_setting: str = "DATASET_MAX_UPLOAD_BYTES"


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
        policy = upload_policy_of(self.request) if self.request is not None else None
        setting = policy.limit_setting if policy is not None else "DATASET_MAX_UPLOAD_BYTES"
        limit = int(getattr(settings, setting))
        if self._received > limit:
            rejected = getattr(self.request, "rejected_uploads", [])
            rejected.append(
                RejectedUpload(
                    field_name=str(self.field_name),
                    file_name=str(self.file_name),
                    received_bytes=self._received,
                    limit_bytes=limit,
                    limit_setting=setting,
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


def rejected_upload_message(item: RejectedUpload, *, setting: str = "DATASET_MAX_UPLOAD_SIZE") -> str:
    """What the user is told of a file the handler dropped for its size: its name, the limit and the
    setting that holds it."""
    limit = human_size(item.limit_bytes)
    return f"{item.file_name}: the file is larger than the {limit} limit ({setting}); nothing was stored."


def rejected_uploads(request: HttpRequest) -> list[RejectedUpload]:
    """The files the size-limiting handler dropped from ``request`` (read once its body is parsed)."""
    rejected: list[RejectedUpload] = getattr(request, "rejected_uploads", [])
    return rejected


def report_rejected_uploads(request: HttpRequest, form: forms.Form) -> bool:
    """Put an error on ``form`` for every file the handler dropped; True when there was one."""
    rejected = rejected_uploads(request)
    for item in rejected:
        form.add_error(item.field_name if item.field_name in form.fields else None, rejected_upload_message(item))
    return bool(rejected)
