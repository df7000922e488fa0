"""Review requests through their states, the committee's signed votes, waivers and comments, the decision
and the checkpoint's tag (docs/approvals.md), one module per job:

- ``lifecycle``: a request made, revised, submitted, reviewed, sent back, withdrawn, revoked; comments;
- ``votes``: signed votes, the password checked again, the lockout after wrong ones;
- ``waivers``: waivers proposed and voted on;
- ``decision``: the request decided by its votes, and what follows on commit (mail, report, tag);
- ``checkpoint``: the answer written into the trial's checkpoint metadata;
- ``pauses``: a round paused when a voter's role changes, and resumed by someone else;
- ``suspension``: an approval (or a pending request) suspended when what it rests on is retired;
- ``common``: the error users get, and reading, locking and moving a request.

Every write is one transaction with its activity event. A request's events all target the request, so
its timeline is one query. The work that follows a change (mail, the decision's report, the
checkpoint's tag) is queued by task name through the outbox (``auditportal.outbox.services
.task_enqueue``) in the same transaction: it runs only once the change has committed, and still runs
if the broker was down then. Callers import this package (``services.review_vote_cast``);
the names below are its public ones.
"""

from __future__ import annotations

from auditportal.approvals.rules import current_votes, decide, quorum, tally_votes
from auditportal.approvals.services.checkpoint import (
    CHECKPOINT_METADATA_KEY,
    checkpoint_metadata,
    review_request_tag_checkpoint,
)
from auditportal.approvals.services.common import (
    MAIL_DECIDED_TASK,
    MAIL_SUBMITTED_TASK,
    TAG_CHECKPOINT_TASK,
    ApprovalError,
)
from auditportal.approvals.services.decision import REPORT_GENERATE_TASK
from auditportal.approvals.services.lifecycle import (
    review_comment_add,
    review_request_create,
    review_request_recommend,
    review_request_request_changes,
    review_request_revise,
    review_request_revoke,
    review_request_start_review,
    review_request_submit,
    review_request_withdraw,
)
from auditportal.approvals.services.pauses import PAUSING_ROLES, review_round_pause, review_round_resume
from auditportal.approvals.services.suspension import (
    SUSPENSION_NEXT,
    approval_suspend,
    approvals_suspend_for_audit,
    approvals_suspend_for_dataset_version,
)
from auditportal.approvals.services.votes import (
    PASSWORD_FAILURE_WINDOW,
    PASSWORD_FAILURES_ALLOWED,
    ReauthenticationFailed,
    review_vote_cast,
)
from auditportal.approvals.services.waivers import waiver_propose, waiver_vote_cast

__all__ = [
    "CHECKPOINT_METADATA_KEY",
    "MAIL_DECIDED_TASK",
    "MAIL_SUBMITTED_TASK",
    "PASSWORD_FAILURES_ALLOWED",
    "PASSWORD_FAILURE_WINDOW",
    "PAUSING_ROLES",
    "REPORT_GENERATE_TASK",
    "SUSPENSION_NEXT",
    "TAG_CHECKPOINT_TASK",
    "ApprovalError",
    "ReauthenticationFailed",
    "approval_suspend",
    "approvals_suspend_for_audit",
    "approvals_suspend_for_dataset_version",
    "checkpoint_metadata",
    "current_votes",
    "decide",
    "quorum",
    "review_comment_add",
    "review_request_create",
    "review_request_recommend",
    "review_request_request_changes",
    "review_request_revise",
    "review_request_revoke",
    "review_request_start_review",
    "review_request_submit",
    "review_request_tag_checkpoint",
    "review_request_withdraw",
    "review_round_pause",
    "review_round_resume",
    "review_vote_cast",
    "tally_votes",
    "waiver_propose",
    "waiver_vote_cast",
]
