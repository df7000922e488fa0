"""A member's own password: changing it, and setting it from the one-time link (accounts.services)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import update_session_auth_hash
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods

from auditportal.accounts import services
from auditportal.accounts.forms import PasswordChangeForm, PasswordSetForm
from auditportal.accounts.permissions import request_user
from auditportal.fairness.errors import UserError
from auditportal.lib.forms import add_user_error


@sensitive_post_parameters()
@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def password_change(request: HttpRequest) -> HttpResponse:
    user = request_user(request)
    form = PasswordChangeForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            services.user_password_change(
                user=user,
                old_password=form.cleaned_data["old_password"],
                new_password=form.cleaned_data["new_password"],
            )
        except UserError as exc:
            add_user_error(form, exc)
        else:
            update_session_auth_hash(request, user)  # this session goes on; the others end
            messages.success(request, "Your password is changed; your votes are signed with the new one.")
            return redirect("home")
    return render(request, "accounts/password_change.html", {"form": form}, status=400 if form.errors else 200)


@sensitive_post_parameters()
@never_cache
@require_http_methods(["GET", "POST"])
def password_set(request: HttpRequest, uidb64: str, token: str) -> HttpResponse:
    account = services.password_link_user(uidb64=uidb64, token=token)
    if account is None:
        return render(request, "accounts/password_set.html", {"form": None}, status=404)
    form = PasswordSetForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            services.user_password_set_from_link(
                uidb64=uidb64, token=token, new_password=form.cleaned_data["new_password"]
            )
        except UserError as exc:
            add_user_error(form, exc)
        else:
            messages.success(request, "Your password is set: log in with it.")
            return redirect("login")
    return render(
        request,
        "accounts/password_set.html",
        {"form": form, "account": account},
        status=400 if form.errors else 200,
    )
