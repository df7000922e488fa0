"""The Django-free fairness core, by kind: ``statistics`` (rates, intervals, verdicts, the prediction
audit), ``files`` (tabular files, shards, the metrics file, group keys), ``documents`` (canonical JSON,
verdict documents, findings, report contexts), ``figures`` (plain data in, a Plotly figure out),
``text`` (sizes and audit tables as text), and ``errors`` (``UserError``). It imports no Django and
nothing else of the portal (import-linter checks it); the apps import it."""
