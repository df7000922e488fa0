"""Settings, all read from the environment (see the configuration table in README.md).

The embedded default needs no server: SQLite under ``var/``, a Celery broker on kombu's filesystem
transport under ``var/``, Determined in local training mode. Production sets DATABASE_URL and
CELERY_BROKER_URL.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url
import django_stubs_ext

from auditportal.lib.env import (
    EnvError,
    env_bool,
    env_float,
    env_int,
    env_list,
    env_optional,
    env_size,
    env_str,
)
from auditportal.lib.files import private_dir, restrict_new_files

# Whatever the portal (or the local trainer it starts) creates is 0600/0700 (auditportal/lib/files.py).
restrict_new_files()

# Lets admin/DRF classes be subscripted at runtime (ModelAdmin[Event]) for the type checker.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(env_str("PORTAL_VAR_DIR", str(BASE_DIR / "var"))).resolve()

DEBUG = env_bool("DEBUG", False)

_secret_key = env_optional("SECRET_KEY")
if _secret_key is None:
    if not DEBUG:
        raise EnvError(
            "SECRET_KEY is required when DEBUG is off (set SECRET_KEY or SECRET_KEY_FILE, "
            "or DEBUG=true for local development)"
        )
    _secret_key = "insecure-development-key-only-used-with-DEBUG-on"
SECRET_KEY = _secret_key

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    # Before django.contrib.auth: its changepassword and createsuperuser commands are replaced by the
    # accounts app's (docs/governance.md, "Accounts and passwords"); Django takes the first app's.
    "auditportal.accounts",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "knox",
    # The OpenAPI schema of /api/v1/ (auditportal/api/schema.py) and, from the sidecar package, the
    # Swagger UI files the docs page serves from static/ (no CDN).
    "drf_spectacular",
    "drf_spectacular_sidecar",
    # Login throttling (settings/security.py): failed logins per username, in its own tables.
    "axes",
    "auditportal.outbox",
    "auditportal.activity",
    "auditportal.datasets",
    "auditportal.experiments",
    "auditportal.audits",
    "auditportal.policies",
    "auditportal.evidence",
    "auditportal.comparisons",
    "auditportal.attributions",
    "auditportal.approvals",
    "auditportal.monitoring",
    "auditportal.reports",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "auditportal.lib.middleware.ContentSecurityPolicyMiddleware",
    "auditportal.lib.middleware.RequestBodyLimitMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "auditportal.lib.middleware.SessionIdleMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as its documentation asks: answers a locked-out login with the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "auditportal.urls"
WSGI_APPLICATION = "auditportal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "auditportal.accounts.context_processors.roles",
                "auditportal.approvals.context_processors.review",
            ],
            # lib is not an app (it has no models), so its template tags are named here.
            "libraries": {"numbers": "auditportal.lib.templatetags.numbers"},
        },
    },
]

_default_database_url = f"sqlite:///{VAR_DIR / 'portal.sqlite3'}"
_database_url = env_str("DATABASE_URL", _default_database_url)
try:
    DATABASES: dict[str, Any] = {
        "default": dj_database_url.parse(_database_url, conn_max_age=env_int("DB_CONN_MAX_AGE", 60, minimum=0))
    }
except ValueError as exc:
    raise EnvError(f"DATABASE_URL is not a database URL: {exc}") from exc
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The web server and the Celery worker share one SQLite file: wait for locks instead of failing.
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_USER_MODEL = "accounts.User"
# django-axes first: it refuses a locked-out username before the password is checked.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# plotly.js is served from the copy inside the installed plotly package (lib/staticfinders.py).
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "auditportal.lib.staticfinders.PackageFileFinder",
]
STATIC_ROOT = VAR_DIR / "staticfiles"

# HTTPS, cookies, the Content-Security-Policy, session expiry, body limits, login throttling:
# settings/security.py (imported at the end).

# Datasets. Uploads stream to disk (never into memory) next to the dataset store, so that moving a
# validated upload into place is a rename on the same file system.
DATASET_STORAGE_DIR = Path(env_str("DATASET_STORAGE_DIR", str(VAR_DIR / "datasets"))).resolve()
DATASET_MAX_UPLOAD_BYTES = env_size("DATASET_MAX_UPLOAD_SIZE", 2 * 1024**3)
DATASET_MAX_GROUPS = env_int("DATASET_MAX_GROUPS", 50, minimum=1)
# What reading a file may cost besides its size: a Parquet file's metadata are checked against both
# before any of its data is read (a 1 MB file can declare 50 million rows, or compress gigabytes).
DATASET_MAX_ROWS = env_int("DATASET_MAX_ROWS", 20_000_000, minimum=1)
DATASET_MAX_DECOMPRESSED_BYTES = env_size("DATASET_MAX_DECOMPRESSED_SIZE", 4 * 1024**3)
# Prediction audits of larger files (or of Parquet files declaring more rows) run on a worker, with
# a page that waits for them; smaller ones are audited in the web request (the CLI always is).
AUDIT_INLINE_MAX_BYTES = env_size("AUDIT_INLINE_MAX_SIZE", 32 * 1024**2)
AUDIT_INLINE_MAX_ROWS = env_int("AUDIT_INLINE_MAX_ROWS", 1_000_000, minimum=1)
# Only seed version 1 of the fairness policy at the first migrate; later versions are data
# (policies.services.policy_create: the /policy/ page, its API, `manage.py fairness_policy set`).
FAIRNESS_TOLERANCE = env_float("FAIRNESS_TOLERANCE", 0.05, minimum=0.0, maximum=0.99)
FAIRNESS_ALPHA = env_float("FAIRNESS_ALPHA", 0.05, minimum=1e-6, maximum=0.5)
# Production batches (docs/monitoring.md, "Production batches"): a posted file larger than this is
# refused while it streams in, before it is stored; a monitor restarts its counts every
# MONITORING_WINDOW_BATCHES counted batches (tumbling windows; 0: one window since the model began serving).
MONITORING_BATCH_MAX_BYTES = env_size("MONITORING_BATCH_MAX_SIZE", 512 * 1024**2)
MONITORING_WINDOW_BATCHES = env_int("MONITORING_WINDOW_BATCHES", 50, minimum=0)
SHARD_DIR = Path(env_str("SHARD_DIR", str(VAR_DIR / "shards"))).resolve()

# Signed reports (docs/reports.md). Files are written once under REPORT_STORAGE_DIR; the private keys
# of the portal's certificate authority and signers are stored encrypted with REPORT_KEY_PASSPHRASE.
REPORT_STORAGE_DIR = Path(env_str("REPORT_STORAGE_DIR", str(VAR_DIR / "reports"))).resolve()
REPORT_ORGANISATION = env_str("REPORT_ORGANISATION", "Bias audit portal")
REPORT_VERIFY_MAX_BYTES = env_size("REPORT_VERIFY_MAX_SIZE", 64 * 1024**2)
# Checking an uploaded PDF costs more than linearly in its signatures (reports/verification.py): a
# file with more signatures or revisions (incremental updates) than these is refused unchecked (a
# portal report has one signature and one revision per signatory, and its certification); the check
# runs in a child process stopped after REPORT_VERIFY_CPU_SECONDS of CPU time (three times that on the
# clock, plus 5 s) or at REPORT_VERIFY_MAX_MEMORY of address space; each member may verify
# REPORT_VERIFY_PER_HOUR files an hour, on the page and the API together (429 past it).
REPORT_VERIFY_MAX_SIGNATURES = env_int("REPORT_VERIFY_MAX_SIGNATURES", 30, minimum=1)
REPORT_VERIFY_MAX_REVISIONS = env_int("REPORT_VERIFY_MAX_REVISIONS", 40, minimum=2)
REPORT_VERIFY_CPU_SECONDS = env_int("REPORT_VERIFY_CPU_SECONDS", 30, minimum=1)
REPORT_VERIFY_MAX_MEMORY_BYTES = env_size("REPORT_VERIFY_MAX_MEMORY", 1024**3)
REPORT_VERIFY_PER_HOUR = env_int("REPORT_VERIFY_PER_HOUR", 30, minimum=1)
REPORT_KEY_PASSPHRASE_MIN_LENGTH = 16
_report_key_passphrase = env_optional("REPORT_KEY_PASSPHRASE")
if _report_key_passphrase is None:
    if not DEBUG:
        raise EnvError(
            "REPORT_KEY_PASSPHRASE is required when DEBUG is off (set REPORT_KEY_PASSPHRASE or "
            "REPORT_KEY_PASSPHRASE_FILE): it encrypts the report signing keys at rest"
        )
    _report_key_passphrase = "insecure-development-report-key-passphrase-only-used-with-DEBUG-on"
if len(_report_key_passphrase) < REPORT_KEY_PASSPHRASE_MIN_LENGTH:
    raise EnvError(f"REPORT_KEY_PASSPHRASE must be at least {REPORT_KEY_PASSPHRASE_MIN_LENGTH} characters long")
REPORT_KEY_PASSPHRASE = _report_key_passphrase
FILE_UPLOAD_TEMP_DIR = str(VAR_DIR / "uploads")
# The embedded default must start on a fresh clone: create its working folders on first use (and
# make var/ private if it was created before the portal's umask was).
private_dir(VAR_DIR)
private_dir(FILE_UPLOAD_TEMP_DIR)
FILE_UPLOAD_MAX_MEMORY_SIZE = 0
FILE_UPLOAD_HANDLERS = [
    # First: refuses the files of anyone who may not upload them at this address, unread.
    "auditportal.lib.uploads.UploadGuardHandler",
    "auditportal.lib.uploads.SizeLimitedUploadHandler",
    "auditportal.lib.uploads.HashingTemporaryFileUploadHandler",
]
FILE_UPLOAD_PERMISSIONS = 0o600

# Celery. Default: kombu's filesystem transport under var/, so the embedded set-up needs no broker.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, Any] = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = VAR_DIR / "celery-broker"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        # Broadcast exchanges (remote control, pidbox) default to ./control otherwise.
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
        # How often an idle worker looks for a message (kombu's default is every second, which a
        # batch waits half of on average before any worker starts on it); a directory listing. Every
        # 20 ms an idle worker's main process used 0.45% of a core (measured over 20 s; 0.15% at 100 ms).
        "polling_interval": 0.02,
    }
    for _folder in ("queue", "processed", "control"):
        (_broker_dir / _folder).mkdir(parents=True, exist_ok=True)
CELERY_RESULT_BACKEND = env_optional("CELERY_RESULT_BACKEND")
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# Tasks queued after a commit go through the outbox (auditportal/outbox, docs/architecture.md): beat
# delivers what the broker did not take at commit time this often; a deliverer holds a row for the
# claim time (a killed one's rows are delivered again after it); sent rows are kept for the days.
OUTBOX_DELIVER_SECONDS = env_int("OUTBOX_DELIVER_SECONDS", 5, minimum=1)
OUTBOX_CLAIM_SECONDS = env_int("OUTBOX_CLAIM_SECONDS", 60, minimum=10)
OUTBOX_KEEP_DAYS = env_int("OUTBOX_KEEP_DAYS", 7, minimum=1)

REST_FRAMEWORK = {
    # No passwords over the API: the browser's session first (its scheme names the WWW-Authenticate
    # header of a 401), then a machine account's API token (accounts.authentication; the gate API
    # lists its own class).
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "auditportal.lib.rest.SessionAuthentication",
        "auditportal.accounts.authentication.ApiTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON bodies through the depth-limited parser (lib/jsonlimits): a deep body is a 400, not a 500.
    "DEFAULT_PARSER_CLASSES": [
        "auditportal.api.parsers.LimitedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "auditportal.lib.rest.DefaultPagination",
    "EXCEPTION_HANDLER": "auditportal.api.exceptions.exception_handler",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "auditportal.api.schema.PortalAutoSchema",
}

# The OpenAPI 3 schema (GET /api/v1/schema/, the docs page /api/v1/docs/): auditportal/api/schema.py.
SPECTACULAR_SETTINGS = {
    "TITLE": "Bias audit portal API",
    "DESCRIPTION": (
        "Datasets, experiments and their trials' metrics and verdicts, prediction audits, verdict documents, "
        "the fairness policy, review requests and the approval gate, deployments and their monitor policies, "
        "and report verification. Browsers use their session (unsafe methods also need the X-CSRFToken "
        "header); deployment pipelines ask the gate, and read a deployment's status, with a gate token "
        "(Authorization: Token <token>)."
    ),
    "VERSION": "1",
    "SCHEMA_PATH_PREFIX": "/api/v1/",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "VerdictEnum": "auditportal.api.schema.VERDICT_CHOICES",
        "PairedVerdictEnum": "auditportal.fairness.statistics.paired.VERDICT_CHOICES",
        "RequestStateEnum": "auditportal.approvals.models.RequestState",
        "WaiverStateEnum": "auditportal.approvals.models.WaiverState",
        "TrialStateEnum": "auditportal.experiments.models.TrialState",
        "AttributionStateEnum": "auditportal.attributions.models.AttributionState",
        "ExperimentStatusEnum": "auditportal.experiments.models.ExperimentStatus",
        "ReportStateEnum": "auditportal.fairness.documents.report_context.REPORT_STATES",
        "DeploymentStateEnum": "auditportal.monitoring.models.DeploymentState",
        "DeploymentChangeKindEnum": "auditportal.monitoring.models.ChangeKind",
        "BatchStateEnum": "auditportal.monitoring.models.BatchState",
        "WebhookDeliveryStatusEnum": "auditportal.monitoring.models.WebhookDeliveryStatus",
        # A queued audit's and a what-if's preparation share their states.
        "QueuedStatusEnum": "auditportal.audits.models.QueuedStatus",
        # The fairness policy's proposals and the monitor policies' share their states.
        "PolicyProposalStateEnum": "auditportal.policies.selectors.PROPOSAL_STATES",
    },
    # ``<deployment:name>`` (monitoring/names.py): a deployment's name, slashes and all.
    "PATH_CONVERTER_OVERRIDES": {
        "deployment": {"type": "string", "pattern": "^[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)*$", "maxLength": 100}
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "auditportal.api.schema.add_error_responses",
    ],
}

# API tokens for machine accounts: django-rest-knox's hashed tokens, in the accounts app's model,
# which adds the scope (the gate, or the rest of the API with the account's roles), a name and
# revocation.
KNOX_TOKEN_MODEL = "accounts.ApiToken"
# knox's own migrations would create its (swapped-out) token table, which nothing uses and whose
# foreign key to the users stops the test database's flush: the app is left unmigrated.
MIGRATION_MODULES = {"knox": None}
REST_KNOX = {"TOKEN_MODEL": KNOX_TOKEN_MODEL, "AUTH_HEADER_PREFIX": "Token", "AUTO_REFRESH": False}
API_TOKEN_MAX_DAYS = env_int("API_TOKEN_MAX_DAYS", 365, minimum=1)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # The report renderer and the stamp font subsetter log every step at INFO.
    # kaleido and choreographer (the figures' Chromium) say at INFO each temporary folder they remove.
    "loggers": {name: {"level": "WARNING"} for name in ("fontTools", "weasyprint", "kaleido", "choreographer")},
}

STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}

# The activity log's signed head (auditportal/reports/heads.py, docs/governance.md): when set, beat
# exports it into this directory every AUDIT_LOG_HEAD_EXPORT_SECONDS, and verify_audit_log holds the
# log to every head file there. Put it where the database's administrators cannot write (another
# host's mount, a write-once bucket): a head is an anchor only as far as it is out of their reach.
_audit_log_head_dir = env_optional("AUDIT_LOG_HEAD_DIR")
AUDIT_LOG_HEAD_DIR = Path(_audit_log_head_dir).resolve() if _audit_log_head_dir else None
AUDIT_LOG_HEAD_EXPORT_SECONDS = env_int("AUDIT_LOG_HEAD_EXPORT_SECONDS", 24 * 3600, minimum=60)

# Experiment settings (backends, Determined credentials, beat schedule) live in their own module.
from auditportal.settings.experiments import *  # noqa: E402,F403

# Mail (review-request notifications).
from auditportal.settings.mail import *  # noqa: E402,F403

# Production posture: HTTPS, cookies, Content-Security-Policy, sessions, body limits, login throttling.
from auditportal.settings.security import *  # noqa: E402,F403

# Uploads a steward never declared, and temporary files a killed web process left, are deleted on a
# schedule (and before each new upload); beat runs in the embedded worker and in compose's "beat".
CELERY_BEAT_SCHEDULE["datasets-expire-staged-uploads"] = {  # noqa: F405
    "task": "datasets.expire_staged_uploads",
    "schedule": timedelta(hours=1),
    "options": {"expires": 3000},
}

# A deployment whose serving model the gate no longer approves (suspended, revoked, a waiver expired)
# falls back to an earlier approved model (monitoring.services.deployments_reconcile).
CELERY_BEAT_SCHEDULE["monitoring-reconcile-deployments"] = {  # noqa: F405
    "task": "monitoring.reconcile_deployments",
    "schedule": timedelta(seconds=60),
    "options": {"expires": 55},
}

# Tasks the broker did not take when their transaction committed (auditportal/outbox): delivered by
# beat once it is back. A run that could not start in time is superseded by the next one.
CELERY_BEAT_SCHEDULE["outbox-deliver"] = {  # noqa: F405
    "task": "outbox.deliver",
    "schedule": timedelta(seconds=OUTBOX_DELIVER_SECONDS),
    "options": {"expires": max(OUTBOX_DELIVER_SECONDS * 2, 5)},
}
CELERY_BEAT_SCHEDULE["outbox-purge"] = {  # noqa: F405
    "task": "outbox.purge",
    "schedule": timedelta(hours=6),
    "options": {"expires": 3000},
}

if AUDIT_LOG_HEAD_DIR is not None:
    CELERY_BEAT_SCHEDULE["reports-export-log-head"] = {  # noqa: F405
        "task": "reports.export_log_head",
        "schedule": timedelta(seconds=AUDIT_LOG_HEAD_EXPORT_SECONDS),
        "options": {"expires": max(AUDIT_LOG_HEAD_EXPORT_SECONDS // 2, 30)},
    }
