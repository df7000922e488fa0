"""Mail settings: review-request notifications (docs/approvals.md).

Imported at the end of ``base.py``. The embedded default writes every message as a file under
``var/mail/``; production sets EMAIL_BACKEND=smtp and the EMAIL_* values (see README.md).
"""

from __future__ import annotations

from pathlib import Path

from auditportal.lib.env import EnvError, env_bool, env_int, env_optional, env_str

_BASE_DIR = Path(__file__).resolve().parent.parent.parent
_VAR_DIR = Path(env_str("PORTAL_VAR_DIR", str(_BASE_DIR / "var"))).resolve()

_BACKENDS = {
    "file": "django.core.mail.backends.filebased.EmailBackend",
    "console": "django.core.mail.backends.console.EmailBackend",
    "smtp": "django.core.mail.backends.smtp.EmailBackend",
}
_backend = env_str("EMAIL_BACKEND", "file")
if _backend not in _BACKENDS:
    raise EnvError(f"EMAIL_BACKEND={_backend!r} is not one of: {', '.join(_BACKENDS)}")
EMAIL_BACKEND = _BACKENDS[_backend]
EMAIL_FILE_PATH = str(Path(env_str("EMAIL_FILE_PATH", str(_VAR_DIR / "mail"))).resolve())
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_optional("EMAIL_HOST_PASSWORD") or ""
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise EnvError("EMAIL_USE_TLS and EMAIL_USE_SSL cannot both be true: choose STARTTLS or implicit TLS")
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10, minimum=1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "Bias audit portal <portal@localhost>")
# The address people open the portal at, for the links in messages.
PORTAL_BASE_URL = env_str("PORTAL_BASE_URL", "http://127.0.0.1:8000").rstrip("/")
