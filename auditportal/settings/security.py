"""Production posture: HTTPS, cookies, the Content-Security-Policy, session expiry, request body
limits and login throttling (django-axes).

Imported at the end of ``base.py``; plain module-level names, parsed strictly from the environment
(see the configuration table in README.md). With DEBUG off every protection is on by default, so
``manage.py check --deploy`` has nothing to warn about; ``make run`` (DEBUG on) serves plain HTTP.
"""

from __future__ import annotations

from datetime import timedelta

from auditportal.lib.env import EnvError, env_bool, env_int, env_optional, env_size

_DEBUG = env_bool("DEBUG", False)

# HTTPS. Behind a reverse proxy that terminates TLS, Django sees plain HTTP: SECURE_PROXY_SSL_HEADER
# names the header the proxy sets to say the client used HTTPS (e.g. X-Forwarded-Proto: https). Set it
# only when the proxy overwrites that header on every request; a client could send it otherwise.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not _DEBUG)
_proxy_header = env_optional("SECURE_PROXY_SSL_HEADER")
if _proxy_header is not None:
    _name, _sep, _value = _proxy_header.partition(":")
    if not _sep or not _name.strip() or not _value.strip():
        raise EnvError(
            f"SECURE_PROXY_SSL_HEADER={_proxy_header!r} is not 'Header-Name: value' (e.g. 'X-Forwarded-Proto: https')"
        )
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + _name.strip().upper().replace("-", "_"), _value.strip())
# Browsers remember to use HTTPS only; the header is sent over HTTPS only.
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if _DEBUG else 31_536_000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not _DEBUG)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", not _DEBUG)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

# Cookies: HTTPS only unless DEBUG is on; JavaScript reads neither.
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", not _DEBUG)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = True

# A session ends after this long without a request of the user's (the pages' automatic polls do not
# count): lib/middleware.SessionIdleMiddleware renews it at most once a minute.
SESSION_IDLE_MINUTES = env_int("SESSION_IDLE_MINUTES", 30, minimum=1)
SESSION_COOKIE_AGE = SESSION_IDLE_MINUTES * 60

# A password link (a new account's first password, or a reset an administrator forced) works once,
# for this long (Django's PasswordResetTokenGenerator; accounts/services.py).
PASSWORD_LINK_HOURS = env_int("PASSWORD_LINK_HOURS", 24, minimum=1)
PASSWORD_RESET_TIMEOUT = PASSWORD_LINK_HOURS * 3600

# Content-Security-Policy (lib/middleware.ContentSecurityPolicyMiddleware): scripts and styles from
# the portal's own static files only, no inline script or <style> element, and no style attribute but
# the two fixed values plotly.js sets (a colour bar's empty one, a heatmap's image-rendering), allowed
# by hash: 'unsafe-hashes' lets a hash match an attribute, so no other attribute value is allowed
# (lib/plotlycss.py; tests/lib/test_plotlycss.py holds them to the installed plotly.js).
PLOTLY_STYLE_ATTRIBUTE_HASHES = (
    "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='",
    "'sha256-AR/cKIZjWPcPmBUPDA6oti9XBiTbJvz0Cro2J1VzzS8='",
)
CONTENT_SECURITY_POLICY: dict[str, tuple[str, ...]] = {
    "default-src": ("'self'",),
    "script-src": ("'self'",),
    "style-src": ("'self'",),
    "style-src-attr": ("'unsafe-hashes'", *PLOTLY_STYLE_ATTRIBUTE_HASHES),
    "img-src": ("'self'", "data:"),
    "font-src": ("'self'",),
    "connect-src": ("'self'",),
    "object-src": ("'none'",),
    "base-uri": ("'none'",),
    "form-action": ("'self'",),
    "frame-ancestors": ("'none'",),
}

# Request bodies other than uploaded files (form fields, JSON): read into memory, so small. Uploaded
# files are refused unread unless the view takes them from this user (lib/uploads.UploadGuardHandler).
DATA_UPLOAD_MAX_MEMORY_SIZE = env_size("REQUEST_BODY_MAX_SIZE", 1024**2)

# Login throttling (django-axes) on /login/ and /admin/login/: after LOGIN_FAILURE_LIMIT wrong
# passwords for one username from one client address, that username's logins from there are refused
# (429) for LOGIN_LOCKOUT_MINUTES, the right password included; a wrong one during the lock starts it
# again. Behind a reverse proxy every client has the proxy's address (REMOTE_ADDR), so the lock falls
# on the username itself. The API takes no passwords (sessions for the browser, gate tokens for
# pipelines).
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_LOCKOUT_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "auditportal.accounts.lockout.lockout_response"
AXES_USERNAME_CALLABLE = "auditportal.accounts.lockout.lockout_username"
AXES_HTTP_RESPONSE_CODE = 429
# Successful logins are not kept (the activity log records what users do); failed ones are. An
# administrator unlocks a username with `manage.py axes_reset_username USERNAME` (not in the admin,
# whose pages show evidence only).
AXES_DISABLE_ACCESS_LOG = True
AXES_ENABLE_ADMIN = False
AXES_VERBOSE = False
