"""plotly.js's own style rules as a static stylesheet, so that pages with figures need no inline style
(the Content-Security-Policy allows none).

At load, plotly.js adds two stylesheets through ``<style>`` elements: its own rules, unless the page
already has an element with id ``plotly.js-style-global`` and class ``no-inline-styles`` (src/lib/dom.js,
plotly.js >= 2.35), and the rules of the map library it bundles (maplibre), unless the page has an
element with that stylesheet's id (a hash). templates/_figures_scripts.html links
``static/vendor/plotly/plotly.css``, which holds both, under both ids. The file is made from the
installed plotly.min.js by this module, and tests/lib/test_plotlycss.py holds the file and the
template to the installed package; after upgrading plotly, write the file again (and the id the test
names):

    .venv/bin/python -m auditportal.lib.plotlycss > static/vendor/plotly/plotly.css

plotly.js also sets two style attributes that no stylesheet can stand in for, both fixed strings: an
empty one on a colour bar's fills, and an image-rendering declaration on a heatmap's image (drawn one
pixel per cell and stretched: without it the browser blurs the cells into each other). The policy
allows exactly these two values by their hashes (``style-src-attr 'unsafe-hashes'``, settings/
security.py; the heatmap's rule is also in static/css/portal.css, for browsers without 'unsafe-hashes').
tests/lib/test_plotlycss.py holds the hashes to the installed plotly.js; print them with

    .venv/bin/python -m auditportal.lib.plotlycss --style-attribute-hashes
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import sys
from dataclasses import dataclass

from auditportal.lib.staticfinders import package_file

# The first entry of the rules' object literal in plotly.js's build (build/plotcss.js).
_FIRST_RULE = '"X,X div":'
# The bundled map library's stylesheet: added at load unless an element has its id.
_BUNDLED_STYLE = re.compile(
    r'if\(!document\.getElementById\("(?P<id>[0-9a-f]{64})"\)\)\{var (?P<var>\w+)=document\.createElement\("style"\);'
    r'(?P=var)\.id="(?P=id)",(?P=var)\.textContent='
)
# The image-rendering declarations plotly.js tries, in its build (src/constants/pixelated_image.js).
_PIXELATED = re.compile(r'\.CSS_DECLARATIONS=(?P<list>\[(?:\["[^"]*","[^"]*"\],?)+\])')
# A colour bar's fills: plotly.js empties their style attribute before colouring them.
_EMPTY_STYLE = 'attr("style","")'


class PlotlyCssNotFound(ValueError):
    pass


def _string(text: str, start: int) -> tuple[str, int]:
    """The JavaScript string literal at ``start``, and the index after it."""
    quote = text[start]
    if quote not in "'\"":
        raise PlotlyCssNotFound(f"expected a string at offset {start}, found {text[start : start + 20]!r}")
    out = []
    index = start + 1
    while text[index] != quote:
        if text[index] == "\\":
            index += 1
        out.append(text[index])
        index += 1
    return "".join(out), index + 1


def _key(text: str, start: int) -> tuple[str, int]:
    """An object literal's key: a string, or a bare name (the minifier drops the quotes of ``Y``)."""
    if text[start] in "'\"":
        return _string(text, start)
    end = start
    while text[end].isalnum() or text[end] in "_$":
        end += 1
    if end == start:
        raise PlotlyCssNotFound(f"expected a key at offset {start}, found {text[start : start + 20]!r}")
    return text[start:end], end


def plotly_rules(javascript: str) -> list[tuple[str, str]]:
    """(selector, declarations) of plotly.js's global style rules, in the order it adds them."""
    start = javascript.find("{" + _FIRST_RULE)
    if start < 0:
        raise PlotlyCssNotFound("plotly.js's style rules were not found in this build")
    rules = []
    index = start + 1
    while True:
        selector, index = _key(javascript, index)
        if javascript[index] != ":":
            raise PlotlyCssNotFound(f"expected ':' at offset {index}")
        declarations, index = _string(javascript, index + 1)
        rules.append((selector, declarations))
        if javascript[index] == "}":
            return rules
        if javascript[index] != ",":
            raise PlotlyCssNotFound(f"expected ',' or '}}' at offset {index}")
        index += 1


@dataclass(frozen=True)
class BundledStyle:
    id: str
    css: str


def bundled_style(javascript: str) -> BundledStyle:
    """The map library's stylesheet plotly.js adds at load, and the id that stops it."""
    found = _BUNDLED_STYLE.search(javascript)
    if found is None:
        raise PlotlyCssNotFound("the bundled map library's stylesheet was not found in this build")
    css, _ = _string(javascript, found.end())
    return BundledStyle(found["id"], css)


def plotly_css(javascript: str) -> str:
    """The stylesheets plotly.js would add: its rules, each rule's X and Y placeholders replaced as it
    does, in the order its sheet ends with (each rule is inserted first, so the last added comes
    first); then the bundled map library's."""
    lines = ["/* plotly.js's style rules, made by auditportal/lib/plotlycss.py from the installed plotly.min.js. */"]
    for selector, declarations in reversed(plotly_rules(javascript)):
        full = selector.replace(",", " ,", 1) if selector.startswith(",") else selector
        full = full.replace("X", ".js-plotly-plot .plotly").replace("Y", ".plotly-notifier")
        lines.append(f"{full}{{{declarations}}}")
    lines.append("/* The map library plotly.js bundles (maplibre). */")
    lines.append(bundled_style(javascript).css)
    return "\n".join(lines) + "\n"


def style_attributes(javascript: str) -> list[str]:
    """The fixed style attribute values plotly.js sets: the colour bar's empty one, and the heatmap's
    image-rendering declarations joined as plotly.js joins them (its ``STYLE``)."""
    found = _PIXELATED.search(javascript)
    if found is None:
        raise PlotlyCssNotFound("plotly.js's image-rendering declarations were not found in this build")
    if _EMPTY_STYLE not in javascript:
        raise PlotlyCssNotFound("plotly.js's colour bar no longer empties a style attribute in this build")
    declarations = json.loads(found["list"])
    return ["", "".join(f"{name}: {value}; " for name, value in declarations)]


def csp_hash(text: str) -> str:
    """A Content-Security-Policy hash source for ``text`` ('sha256-...')."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def installed_plotly_js() -> str:
    located = package_file("plotly", "package_data/plotly.min.js")
    if located is None:
        raise PlotlyCssNotFound("the plotly package holds no package_data/plotly.min.js")
    return located.read_text(encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] == ["--style-attribute-hashes"]:
        sys.stdout.write("".join(csp_hash(value) + "\n" for value in style_attributes(installed_plotly_js())))
    else:
        sys.stdout.write(plotly_css(installed_plotly_js()))
