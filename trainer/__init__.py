"""Determined model directory: tabular binary classifier with in-loop bias monitoring.

Never imports Django or ``auditportal``; the portal talks to it through the shard format
(docs/shard-format.md) and the metrics file described in trainer/README.md.
"""
