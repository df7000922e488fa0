from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.approvals import apis

# Mounted under /api/v1/ by auditportal/api/urls.py.
_R = "review-requests/<int:request_id>/"

urlpatterns: list[URLPattern | URLResolver] = [
    path("gate/", apis.GateApi.as_view(), name="api-gate"),
    path("review-requests/", apis.ReviewRequestListApi.as_view(), name="api-review-requests"),
    path(_R, apis.ReviewRequestDetailApi.as_view(), name="api-review-request"),
    path(_R + "revise/", apis.ReviewRequestReviseApi.as_view(), name="api-review-request-revise"),
    path(_R + "submit/", apis.ReviewRequestSubmitApi.as_view(), name="api-review-request-submit"),
    path(_R + "start-review/", apis.ReviewRequestStartReviewApi.as_view(), name="api-review-request-start-review"),
    path(
        _R + "request-changes/",
        apis.ReviewRequestRequestChangesApi.as_view(),
        name="api-review-request-request-changes",
    ),
    path(_R + "withdraw/", apis.ReviewRequestWithdrawApi.as_view(), name="api-review-request-withdraw"),
    path(_R + "revoke/", apis.ReviewRequestRevokeApi.as_view(), name="api-review-request-revoke"),
    path(_R + "resume/", apis.ReviewRequestResumeApi.as_view(), name="api-review-request-resume"),
    path(_R + "recommend/", apis.ReviewRequestRecommendApi.as_view(), name="api-review-request-recommend"),
    path(_R + "comments/", apis.ReviewCommentApi.as_view(), name="api-review-request-comment"),
    path(_R + "votes/", apis.ReviewVoteApi.as_view(), name="api-review-request-vote"),
    path(_R + "waivers/", apis.WaiverProposeApi.as_view(), name="api-review-request-waiver"),
    path("waivers/<int:waiver_id>/votes/", apis.WaiverVoteApi.as_view(), name="api-waiver-vote"),
]
