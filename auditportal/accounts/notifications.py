"""The one mail the accounts app sends: a member's one-time link to set their password (a new account,
or a reset an administrator forced). Sent by accounts.tasks once the change committed (outbox)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.tokens import default_token_generator
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from auditportal.accounts.models import User
from auditportal.lib.mail import mail_send


def password_link_url(user: User) -> str:
    """A link that lets ``user`` set their password once, for PASSWORD_LINK_HOURS (made when mailed,
    never stored)."""
    uidb64 = urlsafe_base64_encode(force_bytes(user.pk))
    token = default_token_generator.make_token(user)
    return f"{settings.PORTAL_BASE_URL}{reverse('accounts:password-set', args=[uidb64, token])}"


def password_link(*, user_id: int, reason: str) -> int:
    """Mail the link to the account's address; how many messages went out (0 or 1)."""
    user = User.objects.filter(pk=user_id, is_active=True).first()
    if user is None or not user.email or user.has_usable_password():
        # Deactivated, no address, or a password was set since (the link would not work anyway).
        return 0
    opening = (
        f"An account named {user.username} was made for you on the bias audit portal."
        if reason == "new account"
        else f"An administrator reset the password of your account {user.username} on the bias audit portal. "
        "Your old password no longer works, for logging in or for signing votes."
    )
    body = "\n".join(
        [
            opening,
            "",
            f"Set your password here (the link works once, for {settings.PASSWORD_LINK_HOURS} hours):",
            password_link_url(user),
            "",
            "Nobody else knows the password you choose. If you did not expect this message, tell the "
            "ethics committee: the portal's activity log names who asked for it.",
        ]
    )
    # A failure is logged (lib.mail); the administrator can force the reset again.
    return mail_send(subject="Set your password", body=body, addresses=[user.email])
