"""Who may read the fairness policy and who may change it (docs/architecture.md), and which changes
loosen it (docs/governance.md, "Fairness policy: the two-person rule").

Named as every app's rules (accounts/rules.py): ``can_<action>`` answers, ``check_<action>`` raises the
refusal (403). Every member reads the active policy and its history; administrators make the next
version. A next version that loosens anything governance relies on (``policy_loosenings``) is only a
proposal until a different administrator confirms it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from django.core.exceptions import PermissionDenied

from auditportal.accounts import rules as account_rules
from auditportal.accounts.models import Role, User
from auditportal.policies.models import PolicyProposal


class AdministratorRequired(PermissionDenied):
    def __init__(self) -> None:
        super().__init__("Only an administrator can change the fairness policy.")


class OwnProposal(PermissionDenied):
    def __init__(self, proposal: PolicyProposal) -> None:
        super().__init__(
            f"You proposed fairness policy proposal #{proposal.pk}: a different administrator must confirm it "
            "(two-person rule)."
        )


# What each loosening means, in the order policy_loosenings names them: the one list of what needs
# a second administrator. Tightening (or leaving a value as it is) applies at once.
LOOSENINGS: Final[dict[str, str]] = {
    "tolerance": "a wider tolerance δ (larger gaps pass)",
    "alpha": "a higher alpha (a larger familywise error rate)",
    "metrics": "fewer judged metrics (a metric no longer counts towards a verdict)",
    "reference_rule": "another reference rule (not comparable, so treated as loosening)",
    "min_group_size": "a smaller or no minimum group size (smaller groups can PASS)",
    "approval_quorum": "a lower approval quorum (fewer committee members decide)",
}


def policy_loosenings(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The names of the values of ``new`` that loosen governance compared with ``old`` (both as
    ``FairnessPolicy.as_json()`` gives them), in the order of ``LOOSENINGS``."""
    old_size, new_size = old["min_group_size"], new["min_group_size"]
    loosened = {
        "tolerance": new["tolerance"] > old["tolerance"],
        "alpha": new["alpha"] > old["alpha"],
        "metrics": bool(set(old["metrics"]) - set(new["metrics"])),
        "reference_rule": new["reference_rule"] != old["reference_rule"],
        # None is no minimum: the loosest there is.
        "min_group_size": old_size is not None and (new_size is None or new_size < old_size),
        "approval_quorum": new["approval_quorum"] < old["approval_quorum"],
    }
    return [name for name, loosens in loosened.items() if loosens]


def can_view(user: User) -> bool:
    return account_rules.can_view(user)


def check_view(user: User) -> None:
    account_rules.check_view(user)


def can_change(user: User) -> bool:
    return account_rules.has_any_role(user, Role.ADMIN)


def check_change(user: User) -> None:
    if not can_change(user):
        raise AdministratorRequired


def can_confirm(user: User, proposal: PolicyProposal) -> bool:
    """An administrator other than the proposer (whether the proposal is still open is the service's)."""
    return can_change(user) and proposal.proposed_by_id != user.pk


def check_confirm(user: User, proposal: PolicyProposal) -> None:
    check_change(user)
    if proposal.proposed_by_id == user.pk:
        raise OwnProposal(proposal)


def can_withdraw(user: User, proposal: PolicyProposal) -> bool:
    """Any administrator, the proposer included: withdrawing loosens nothing."""
    return can_change(user)


def check_withdraw(user: User, proposal: PolicyProposal) -> None:
    check_change(user)
