"""Figures of the review dashboard: pure functions, plain data in, a Plotly figure out.

No Django here (the dependency rule, docs/architecture.md): views and tasks load the data, call a
figure function and send ``figure_json(figure)`` to the page, where ``static/js/figures.js`` draws it
with the plotly.js served from ``static/vendor/plotly/``. The signed reports render the same
figures as SVG.

plotly is imported inside the functions that draw, never at the top of a module: it takes about 0.1 s
to import, and the selectors and services that use these modules are loaded by every management
command (tests/test_startup.py holds this).
"""
