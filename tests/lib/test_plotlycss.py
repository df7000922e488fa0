from __future__ import annotations

from pathlib import Path

from django.conf import settings

from auditportal.lib.plotlycss import (
    bundled_style,
    csp_hash,
    installed_plotly_js,
    plotly_css,
    plotly_rules,
    style_attributes,
)

ROOT = Path(__file__).resolve().parents[2]
STYLESHEET = ROOT / "static" / "vendor" / "plotly" / "plotly.css"
TEMPLATE = ROOT / "templates" / "_figures_scripts.html"
REGENERATE = ".venv/bin/python -m auditportal.lib.plotlycss > static/vendor/plotly/plotly.css"


def test_the_committed_stylesheet_is_the_one_the_installed_plotly_js_would_add() -> None:
    assert STYLESHEET.read_text(encoding="utf-8") == plotly_css(installed_plotly_js()), (
        f"plotly changed: write the stylesheet again with `{REGENERATE}`"
    )


def test_the_figures_template_names_both_stylesheets_plotly_js_looks_for() -> None:
    template = TEMPLATE.read_text(encoding="utf-8")
    assert '<link id="plotly.js-style-global" class="no-inline-styles" rel="stylesheet"' in template
    expected = bundled_style(installed_plotly_js()).id
    assert f'<link id="{expected}" rel="stylesheet"' in template, (
        f"plotly's bundled map stylesheet now has the id {expected}: put it in {TEMPLATE.name}"
    )


def test_the_rules_are_read_with_plotly_js_placeholders_replaced_last_added_first() -> None:
    javascript = (
        'var a={"X,X div":\'font-family:"Open Sans";\',"X .b":"c:d;",Y:"e:f;",",X .g":"h:i;"};'
        'if(!document.getElementById("' + "0" * 64 + '")){var e=document.createElement("style");'
        'e.id="' + "0" * 64 + "\",e.textContent='.m{n:o}',document.head.appendChild(e)}"
    )
    assert plotly_rules(javascript) == [
        ("X,X div", 'font-family:"Open Sans";'),
        ("X .b", "c:d;"),
        ("Y", "e:f;"),
        (",X .g", "h:i;"),
    ]
    css = plotly_css(javascript).splitlines()
    assert css[1:] == [
        " ,.js-plotly-plot .plotly .g{h:i;}",
        ".plotly-notifier{e:f;}",
        ".js-plotly-plot .plotly .b{c:d;}",
        '.js-plotly-plot .plotly,.js-plotly-plot .plotly div{font-family:"Open Sans";}',
        "/* The map library plotly.js bundles (maplibre). */",
        ".m{n:o}",
    ]


def test_the_policy_allows_exactly_the_style_attributes_the_installed_plotly_js_sets() -> None:
    values = style_attributes(installed_plotly_js())
    assert values[0] == ""
    assert values[1].startswith("image-rendering: optimizeSpeed; ")
    assert values[1].endswith("image-rendering: pixelated; ")
    assert settings.CONTENT_SECURITY_POLICY["style-src-attr"] == ("'unsafe-hashes'", *map(csp_hash, values)), (
        "plotly changed its style attributes: put the hashes of "
        "`.venv/bin/python -m auditportal.lib.plotlycss --style-attribute-hashes` in settings/security.py"
    )


def test_a_hash_source_is_the_base64_sha256_of_the_text() -> None:
    assert csp_hash("") == "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='"
    javascript = 'X.CSS_DECLARATIONS=[["a","b"],["a","c"]];' + 'e.attr("style","")'
    assert style_attributes(javascript) == ["", "a: b; a: c; "]
