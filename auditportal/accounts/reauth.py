"""Signing with one's password: the one re-authentication service of the portal (docs/governance.md,
"Signed reports"; docs/approvals.md, "A vote is a signature").

A vote, a waiver vote and a report signature each ask the member for their password again. Every
refused password is recorded as an activity event (committed although the action is refused), and
``PASSWORD_FAILURES_ALLOWED`` of them within ``PASSWORD_FAILURE_WINDOW``, whatever they were for,
lock everything the member signs with their password until the oldest leaves the window: a guessed
password must not sign a vote, and guessing at the report form must not reset the count.

Re-exported by accounts.services (the public module other apps import).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final, Literal

from django.db import models, transaction
from django.utils import timezone

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.activity.services import event_record
from auditportal.fairness.errors import UserError
from auditportal.lib.transactions import inside_atomic_block

PASSWORD_FAILURES_ALLOWED: Final = 5
PASSWORD_FAILURE_WINDOW: Final = timedelta(minutes=15)


class ReauthenticationFailed(UserError):
    """The password given to sign something is not the member's, or their signing is locked."""


# What a password is asked for.
Purpose = Literal["vote", "report_signature"]


@dataclass(frozen=True)
class _Wording:
    """The event a refused password records, and what the member is told."""

    verb: Verb
    # "your votes": what the lock message says is locked.
    locked: str
    wrong: str
    empty: str


_PURPOSES: Final[dict[Purpose, _Wording]] = {
    # Votes on review requests and on waivers.
    "vote": _Wording(
        verb=Verb.REVIEW_VOTE_REAUTH_FAILED,
        locked="your votes",
        wrong="That password is not correct: a vote is signed by entering your own password again.",
        empty="Enter your password: a vote is signed by entering it again.",
    ),
    "report_signature": _Wording(
        verb=Verb.REPORT_SIGN_REAUTH_FAILED,
        locked="your report signatures",
        wrong="That password is not correct; the report was not signed.",
        empty="Enter your password: a report is signed by entering it again.",
    ),
}
# Every verb that records a refused password: they count together.
FAILURE_VERBS: Final = tuple(wording.verb for wording in _PURPOSES.values())


def user_reauthenticate(
    *, user: User, password: str, purpose: Purpose, target: models.Model, data: dict[str, Any] | None = None
) -> None:
    """Check ``user``'s ``password`` now, to sign ``target`` for ``purpose``; return if it is theirs.

    A wrong or empty password is recorded (the purpose's verb on ``target`` with ``data``, in a
    transaction of its own that commits) and raises ReauthenticationFailed (field ``password``).
    While ``user`` has ``PASSWORD_FAILURES_ALLOWED`` failures of any purpose in the last
    ``PASSWORD_FAILURE_WINDOW``, every attempt is refused, the right password included, and not
    recorded. One member's attempts are checked one at a time (their user row is locked), so parallel
    guesses cannot pass the count together.

    Must not run inside an open transaction (the failure's record must commit).
    """
    wording = _PURPOSES[purpose]
    if inside_atomic_block():
        raise RuntimeError(
            "a password is checked to sign outside any atomic block: a wrong one's record must commit although "
            "the action is refused"
        )
    with transaction.atomic(durable=True):
        # One attempt at a time per member: parallel guesses must not pass the count together.
        User.objects.select_for_update().only("pk").get(pk=user.pk)
        since = timezone.now() - PASSWORD_FAILURE_WINDOW
        failures = list(
            Event.objects.filter(verb__in=FAILURE_VERBS, actor=user, at__gte=since)
            .order_by("at")
            .values_list("at", flat=True)
        )
        if len(failures) >= PASSWORD_FAILURES_ALLOWED:
            until = failures[-PASSWORD_FAILURES_ALLOWED] + PASSWORD_FAILURE_WINDOW
            raise ReauthenticationFailed(
                f"{len(failures)} wrong passwords in {PASSWORD_FAILURE_WINDOW.seconds // 60} minutes: "
                f"{wording.locked} are locked until {until:%H:%M} UTC, and so is everything else you sign "
                "with your password.",
                field="password",
            )
        if password and user.check_password(password):
            return
        event_record(actor=user, verb=wording.verb, target=target, data={**(data or {}), "empty": not password})
    raise ReauthenticationFailed(wording.wrong if password else wording.empty, field="password")
