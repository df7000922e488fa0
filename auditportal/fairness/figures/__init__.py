"""Figures of the review dashboard: pure functions, plain data in, a Plotly figure out.

No Django here (the dependency rule, docs/architecture.md): views and tasks load the data, call a
figure function and send ``figure_json(figure)`` to the page, where ``static/js/figures.js`` draws it
with the plotly.js served from ``static/vendor/plotly/``. The signed reports render the same
figures as SVG.
"""
