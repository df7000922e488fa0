"""Who may read deployments and their monitors, and who may change them (docs/monitoring.md).

Named as every app's rules (accounts/rules.py): ``can_<action>`` answers, ``check_<action>`` raises the
refusal (403). Every member reads every deployment, its history and its monitor policy; ML engineers
and administrators create deployments and promote models into them (as they deploy); administrators
change a monitor policy, and a change that loosens it waits for a different administrator.

A machine reads a deployment's status with a token: an API token acts with its account's roles (a
member's reading); a gate token or a monitoring token, whose accounts hold no role, read the status of
a deployment they name, and nothing else here (``reads_status_by_token``).
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from auditportal.accounts import rules as account_rules
from auditportal.accounts.models import ApiToken, Role, TokenScope, User
from auditportal.monitoring.models import MonitorPolicyProposal

# Who deploys: create deployments and promote approved models into them.
DEPLOYER_ROLES = (Role.ML_ENGINEER, Role.ADMIN)
# The token scopes that read one named deployment's status without a role (a rollout controller asks
# with the gate token it asks the gate with; a serving pipeline with its monitoring token).
STATUS_TOKEN_SCOPES = frozenset({TokenScope.GATE, TokenScope.MONITORING})


class DeployerRequired(PermissionDenied):
    def __init__(self, action: str) -> None:
        super().__init__(f"Only an ML engineer or an administrator can {action}.")


class AdministratorRequired(PermissionDenied):
    def __init__(self) -> None:
        super().__init__("Only an administrator can change a deployment's monitor policy.")


class OwnProposal(PermissionDenied):
    def __init__(self, proposal: MonitorPolicyProposal) -> None:
        super().__init__(
            f"You proposed monitor policy proposal #{proposal.pk}: a different administrator must confirm it "
            "(two-person rule)."
        )


def can_view(user: User) -> bool:
    return account_rules.can_view(user)


def check_view(user: User) -> None:
    account_rules.check_view(user)


def reads_status_by_token(token: ApiToken) -> bool:
    """A gate or monitoring token reads a named deployment's status by its scope; an API token acts with
    its account's roles, as a person does (can_view)."""
    return token.scope in STATUS_TOKEN_SCOPES


def can_deploy(user: User) -> bool:
    return account_rules.has_any_role(user, *DEPLOYER_ROLES) and user.is_active


def check_create(user: User) -> None:
    if not can_deploy(user):
        raise DeployerRequired("create a deployment")


def check_promote(user: User) -> None:
    if not can_deploy(user):
        raise DeployerRequired("promote a model into a deployment")


def check_rollback(user: User) -> None:
    if not can_deploy(user):
        raise DeployerRequired("roll a deployment back")


def can_change_policy(user: User) -> bool:
    return account_rules.has_any_role(user, Role.ADMIN) and user.is_active


def check_change_policy(user: User) -> None:
    if not can_change_policy(user):
        raise AdministratorRequired


def can_confirm_policy(user: User, proposal: MonitorPolicyProposal) -> bool:
    """An administrator other than the proposer (whether the proposal is still open is the service's)."""
    return can_change_policy(user) and proposal.proposed_by_id != user.pk


def check_confirm_policy(user: User, proposal: MonitorPolicyProposal) -> None:
    check_change_policy(user)
    if proposal.proposed_by_id == user.pk:
        raise OwnProposal(proposal)


def can_withdraw_policy(user: User, proposal: MonitorPolicyProposal) -> bool:
    """Any administrator, the proposer included: withdrawing loosens nothing."""
    return can_change_policy(user)


def check_withdraw_policy(user: User, proposal: MonitorPolicyProposal) -> None:
    check_change_policy(user)


class WebhookAdministratorRequired(PermissionDenied):
    def __init__(self) -> None:
        super().__init__("Only an administrator can see or change a deployment's webhooks.")


def can_manage_webhooks(user: User) -> bool:
    """Administrators register, list and deactivate a deployment's webhook endpoints (a URL the portal
    posts to from its own host is configuration of the portal, not of a model)."""
    return account_rules.has_any_role(user, Role.ADMIN) and user.is_active


def check_manage_webhooks(user: User) -> None:
    if not can_manage_webhooks(user):
        raise WebhookAdministratorRequired()


def can_read_batches(user: User) -> bool:
    """ML engineers and administrators read a deployment's batches and looks (a monitoring token too,
    by its scope: the API checks it)."""
    return can_deploy(user)


def check_read_batches(user: User) -> None:
    if not can_read_batches(user):
        raise DeployerRequired("read a deployment's production batches")


def can_post_batches(user: User) -> bool:
    """The upload guard's question: the account holds a monitoring token (only such a token
    authenticates a batch's post; the API checks the token itself)."""
    return bool(
        user.is_authenticated
        and user.is_active
        and ApiToken.objects.filter(user=user, scope=TokenScope.MONITORING).exists()
    )
