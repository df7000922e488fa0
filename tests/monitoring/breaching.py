"""A look whose judgement confirms a breach (the FNR of women far above its 5% limit), and one that
does not, built with the pure statistics as the monitor's ingest will."""

from __future__ import annotations

from auditportal.fairness.statistics.monitor import (
    LookJudgement,
    MonitorPolicy,
    RateLimit,
    WindowCounts,
    judge_look,
)

POLICY = MonitorPolicy(groups=("men", "women"), rate_limits=(RateLimit(metric="fnr", limit=0.05),), min_rows=50)


def breaching_look() -> LookJudgement:
    """Women: 180 false rejections of 1,000 qualified applicants (18%, limit 5%); men: 20 of 1,000."""
    judgement = judge_look(
        POLICY,
        {
            "women": WindowCounts(tp=820, fn=180, fp=100, tn=900),
            "men": WindowCounts(tp=980, fn=20, fp=100, tn=900),
        },
    )
    assert judgement.breached
    return judgement


def compliant_look() -> LookJudgement:
    judgement = judge_look(
        POLICY,
        {"women": WindowCounts(tp=990, fn=10, fp=100, tn=900), "men": WindowCounts(tp=990, fn=10, fp=100, tn=900)},
    )
    assert not judgement.breached
    return judgement
