"""Who may read, verify, sign reports and rotate the keys that certify them (docs/reports.md).

Named as every app's rules (accounts/rules.py): ``can_<action>`` answers, ``check_<action>`` raises the
refusal (403). The certificate authorities are public (a third party checks a report with them); the
rest is for members.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from auditportal.accounts import rules as account_rules
from auditportal.accounts.models import Role, User
from auditportal.monitoring import rules as monitoring_rules
from auditportal.reports.models import Report

# The page's refusal; the API answers the first sentence only.
VERIFY_REFUSED = "Only members of the portal can verify reports here"
# A signature is a person's decision on the record, made with their password in their own session: a
# token (a machine account's, or anyone's) is refused before the report or the password is looked at.
SIGN_NEEDS_SESSION = (
    "A token cannot sign for a person: a committee member signs a report with their own password, logged in "
    "with their own session (/login/), on the report's page or through this API."
)


def can_view(user: User) -> bool:
    """Every member reads every report, as every audit; an account without a role reads none (404)."""
    return account_rules.can_view(user)


def can_verify(user: User) -> bool:
    """Members check an uploaded PDF here; anyone can with the CA certificates and their own tools."""
    return account_rules.can_view(user)


def can_sign(user: User, report: Report) -> bool:
    """Whether ``user`` is an ethics-committee member listed among ``report``'s signatories (whether they
    signed it already is the revisions' to say)."""
    if not account_rules.has_any_role(user, Role.ETHICS_COMMITTEE):
        return False
    signatories = report.context.get("signatories") or []
    return any(person.get("key") == user.get_username() for person in signatories)


# Who asks for a deployment's monitoring report: those who oversee what was approved (docs/monitoring.md,
# "Monitoring reports"); ML engineers read the deployment's records themselves.
MONITORING_REPORT_ROLES = (Role.ADMIN, Role.ETHICS_COMMITTEE, Role.REVIEWER)


def can_request_monitoring_report(user: User) -> bool:
    return (
        monitoring_rules.can_view(user)
        and account_rules.has_any_role(user, *MONITORING_REPORT_ROLES)
        and user.is_active
    )


def check_request_monitoring_report(user: User) -> None:
    if not can_request_monitoring_report(user):
        raise PermissionDenied(
            "Only an administrator, an ethics-committee member or a reviewer can ask for a monitoring report."
        )


def check_sign(user: User) -> None:
    account_rules.check_role(user, Role.ETHICS_COMMITTEE, action="sign a report")


def check_rotate_keys(user: User) -> None:
    """Administrators make a new certificate authority or organisation key."""
    account_rules.check_role(user, Role.ADMIN, action="rotate the report signing keys")


def check_export_log_head(user: User) -> None:
    """Administrators export the activity log's signed head (``manage.py audit_log_head export``)."""
    account_rules.check_role(user, Role.ADMIN, action="export the activity log's signed head")
