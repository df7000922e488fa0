"""Review requests, votes, waivers, the decision and the checkpoint's tag (docs/approvals.md): a package,
split by job in the next commit; callers import it as before."""

from __future__ import annotations

from auditportal.approvals.services.lifecycle import *  # noqa: F403
