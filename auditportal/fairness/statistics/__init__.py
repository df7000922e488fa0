"""The statistics: rates and intervals, comparisons and verdicts per group (stats, with the
distributions it needs), one attribute judged under a policy (judge), and the prediction audit
end to end (audit, with its fast counting path, counting). numpy and the standard library."""
