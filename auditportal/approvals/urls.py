from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.approvals import views

app_name = "approvals"

_R = "<int:request_id>/"

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.review_queue, name="queue"),
    path("all/", views.review_request_list, name="list"),
    path("new/", views.review_request_new, name="new"),
    path(_R, views.review_request_detail, name="request"),
    path(_R + "status/", views.review_request_status, name="status"),
    path(_R + "revise/", views.review_request_revise, name="revise"),
    path(_R + "submit/", views.review_request_submit, name="submit"),
    path(_R + "start-review/", views.review_request_start_review, name="start-review"),
    path(_R + "request-changes/", views.review_request_request_changes, name="request-changes"),
    path(_R + "withdraw/", views.review_request_withdraw, name="withdraw"),
    path(_R + "revoke/", views.review_request_revoke, name="revoke"),
    path(_R + "resume/", views.review_round_resume, name="resume"),
    path(_R + "recommend/", views.review_request_recommend, name="recommend"),
    path(_R + "comments/", views.review_comment_add, name="comment"),
    path(_R + "vote/", views.review_vote_cast, name="vote"),
    path(_R + "waivers/", views.waiver_propose, name="waiver"),
    path("waivers/<int:waiver_id>/vote/", views.waiver_vote_cast, name="waiver-vote"),
]
