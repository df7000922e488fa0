"""The signed reports of a review request's decisions, on the request's page.

The reports app sits above approvals: the request page (approvals/views.py) names this tag in its
template instead of its view importing the reports' selectors.
"""

from __future__ import annotations

from typing import Any

from django import template

from auditportal.accounts.models import User
from auditportal.approvals.models import ReviewRequest
from auditportal.fairness.documents.report_context import display_time
from auditportal.reports import rules, selectors

register = template.Library()


@register.filter(is_safe=False)
def report_time(value: str) -> str:
    """An ISO 8601 time of a report's context as the report prints it (``2026-11-30 14:05 UTC``)."""
    return display_time(str(value))


@register.inclusion_tag("reports/_review_request_reports.html", takes_context=True)
def review_request_reports(context: template.Context, request: ReviewRequest) -> dict[str, Any]:
    """Each report of ``request``'s decisions, and whether the page's user may sign it now."""
    user = context["request"].user
    return {
        "reports": [
            (report, isinstance(user, User) and rules.can_sign(user, report))
            for report in selectors.review_request_reports(request=request)
        ]
    }
