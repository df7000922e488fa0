from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.accounts import views

app_name = "accounts"

_M = "members/<int:user_id>/"

urlpatterns: list[URLPattern | URLResolver] = [
    path("password/", views.password_change, name="password-change"),
    path("password/set/<uidb64>/<token>/", views.password_set, name="password-set"),
    # The administrators' members pages.
    path("members/", views.member_list, name="members"),
    path("members/new/", views.member_new, name="member-new"),
    path(_M, views.member_detail, name="member"),
    path(_M + "roles/grant/", views.member_role_grant, name="member-role-grant"),
    path(_M + "roles/revoke/", views.member_role_revoke, name="member-role-revoke"),
    path(_M + "active/", views.member_active, name="member-active"),
    path(_M + "password-reset/", views.member_password_reset, name="member-password-reset"),
    path(_M + "email/", views.member_email, name="member-email"),
    path("role-proposals/<int:role_proposal_id>/confirm/", views.role_proposal_confirm, name="role-proposal-confirm"),
    path(
        "role-proposals/<int:role_proposal_id>/withdraw/", views.role_proposal_withdraw, name="role-proposal-withdraw"
    ),
]
