"""Test settings: the production settings with a throw-away key and var directory."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("SECRET_KEY", "test-secret-key-not-for-production")
os.environ.setdefault("PORTAL_VAR_DIR", tempfile.mkdtemp(prefix="auditportal-test-var-"))

from auditportal.settings.base import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# WhiteNoise warns about a missing STATIC_ROOT; tests serve static files through the finders.
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # noqa: F405
