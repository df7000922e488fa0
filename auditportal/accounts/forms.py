from __future__ import annotations

from typing import Any

from django import forms


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
