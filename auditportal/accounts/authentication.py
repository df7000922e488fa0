"""Token authentication for machine accounts: django-rest-knox's scheme (``Authorization: Token
<token>``, the token's SHA-512 compared in constant time) over accounts.ApiToken, refusing revoked and
expired tokens (knox would delete an expired one; the portal keeps it) and tokens of another scope.

One class per scope: the gate API lists GateTokenAuthentication (beside the session), the rest of the
API ApiTokenAuthentication (REST_FRAMEWORK's defaults, beside the session), so a gate token opens
nothing but the gate, and an API token acts with its account's roles everywhere but there; the
monitoring endpoints that take production batches list MonitoringTokenAuthentication. An endpoint that
every scope may read (a deployment's status, which rollout controllers poll with the token they ask the
gate with) lists AnyTokenAuthentication and decides by ``request.auth.scope`` itself.
"""

from __future__ import annotations

import binascii
from hmac import compare_digest
from typing import Any

from django.utils import timezone
from knox.auth import TokenAuthentication
from knox.crypto import hash_token
from knox.settings import CONSTANTS
from rest_framework import exceptions

from auditportal.accounts.models import ApiToken, TokenScope, User


class ScopedTokenAuthentication(TokenAuthentication):  # type: ignore[misc]
    scopes: tuple[TokenScope, ...]

    def authenticate_credentials(self, token: bytes) -> tuple[User, ApiToken]:
        text = token.decode("utf-8", errors="replace")
        for candidate in ApiToken.objects.filter(token_key=text[: CONSTANTS.TOKEN_KEY_LENGTH]).select_related("user"):
            try:
                digest = hash_token(text)
            except (TypeError, binascii.Error, UnicodeError):
                break
            if not compare_digest(digest, candidate.digest):
                continue
            if candidate.revoked_at is not None:
                raise exceptions.AuthenticationFailed("This token was revoked.")
            if candidate.expiry <= timezone.now():
                raise exceptions.AuthenticationFailed(f"This token expired at {candidate.expiry:%Y-%m-%d %H:%M} UTC.")
            if candidate.scope not in self.scopes:
                wanted = " or ".join(repr(scope.value) for scope in self.scopes)
                raise exceptions.AuthenticationFailed(
                    f"This token's scope is {candidate.scope!r} ({TokenScope(candidate.scope).label.lower()}), "
                    f"not {wanted}: ask an administrator for a token of scope {wanted}."
                )
            if not candidate.user.is_active:
                raise exceptions.AuthenticationFailed("This token's account is inactive.")
            return candidate.user, candidate
        raise exceptions.AuthenticationFailed("Invalid token.")

    def authenticate_header(self, request: Any) -> str:
        return "Token"


class GateTokenAuthentication(ScopedTokenAuthentication):
    scopes = (TokenScope.GATE,)


class ApiTokenAuthentication(ScopedTokenAuthentication):
    scopes = (TokenScope.API,)


class MonitoringTokenAuthentication(ScopedTokenAuthentication):
    scopes = (TokenScope.MONITORING,)


class AnyTokenAuthentication(ScopedTokenAuthentication):
    """A token of any scope: the view reads ``request.auth.scope`` (an API token's account still needs
    its roles; a gate or monitoring token's account holds none)."""

    scopes = tuple(TokenScope)
