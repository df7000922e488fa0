from __future__ import annotations

from typing import Any

from django import forms

from auditportal.accounts.models import Role
from auditportal.accounts.selectors import NO_ROLE_FILTER


class _NewPasswordForm(forms.Form):
    new_password = forms.CharField(
        label="New password", widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}), strip=False
    )
    new_password_again = forms.CharField(
        label="New password, again", widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}), strip=False
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("new_password") and data.get("new_password") != data.get("new_password_again"):
            self.add_error("new_password_again", "The two new passwords differ.")
        return data


class PasswordSetForm(_NewPasswordForm):
    """A member's first password, or a new one after a forced reset, from the mailed link."""


class PasswordChangeForm(_NewPasswordForm):
    old_password = forms.CharField(
        label="Current password", widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}), strip=False
    )
    field_order = ["old_password", "new_password", "new_password_again"]


_DECIDING_HELP = (
    "The ethics-committee and administrator roles are proposed: they take effect when a second "
    "administrator, not the member, confirms them."
)


class MemberSearchForm(forms.Form):
    """The members list's filters, from the query string."""

    role = forms.ChoiceField(
        label="Role", required=False, choices=[("", "Any role"), *Role.choices, (NO_ROLE_FILTER, "No role")]
    )
    active = forms.ChoiceField(
        label="Account", required=False, choices=[("", "Active or not"), ("yes", "Active"), ("no", "Deactivated")]
    )
    q = forms.CharField(label="Name", required=False, max_length=150, help_text="Part of a name or an address.")


class MemberCreateForm(forms.Form):
    username = forms.CharField(label="Username", max_length=150, widget=forms.TextInput(attrs={"autocomplete": "off"}))
    email = forms.CharField(
        label="E-mail address",
        max_length=254,
        widget=forms.EmailInput(attrs={"autocomplete": "off"}),
        help_text="The link to set their password is mailed here; it works once.",
    )
    first_name = forms.CharField(label="First name", required=False, max_length=150)
    last_name = forms.CharField(label="Last name", required=False, max_length=150)
    roles = forms.MultipleChoiceField(
        label="Roles",
        required=False,
        choices=Role.choices,
        widget=forms.CheckboxSelectMultiple,
        help_text=_DECIDING_HELP,
    )


class RoleForm(forms.Form):
    role = forms.ChoiceField(label="Role", choices=Role.choices)


class EmailForm(forms.Form):
    email = forms.CharField(label="E-mail address", max_length=254, widget=forms.EmailInput())


class ActiveForm(forms.Form):
    active = forms.ChoiceField(choices=[("yes", "activate"), ("no", "deactivate")])
