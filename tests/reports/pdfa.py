# pyHanko's reader and generic objects carry no annotations.
# mypy: disable-error-code="no-untyped-call"
"""The PDF/A-3b requirements a report's structure can be checked against here, without veraPDF (a Java
tool; no Java package registry is reachable from our machines). docs/reports.md lists what this
covers and what it does not.

``problems(data)`` walks every object reachable from the newest trailer (pyHanko's reader, so an
incrementally signed file is read as a reader sees it) and returns one line per broken rule, naming the
ISO 19005 clause, or an empty list.
"""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from typing import Any

from pyhanko.pdf_utils import generic
from pyhanko.pdf_utils.reader import PdfFileReader

NS = {
    "x": "adobe:ns:meta/",
    "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
    "pdfaid": "http://www.aiim.org/pdfa/ns/id/",
    "pdf": "http://ns.adobe.com/pdf/1.3/",
    "xmp": "http://ns.adobe.com/xap/1.0/",
    "dc": "http://purl.org/dc/elements/1.1/",
}
# 6.5.1: actions a PDF/A file may not contain.
FORBIDDEN_ACTIONS = {
    "/Launch", "/Sound", "/Movie", "/ResetForm", "/ImportData", "/Hide", "/SetOCGState", "/Rendition",
    "/Trans", "/GoTo3DView", "/JavaScript",
}  # fmt: skip
AF_RELATIONSHIPS = {"/Source", "/Data", "/Alternative", "/Supplement", "/Unspecified"}
# Annotation flags (ISO 32000-1, 12.5.3): Invisible 1, Hidden 2, Print 4, NoView 32, ToggleNoView 256.
PRINT, NOT_SHOWN = 4, 1 | 2 | 32 | 256


def problems(data: bytes) -> list[str]:
    found: list[str] = []
    # 6.1.2: "%PDF-1.n", then a comment line of at least four bytes above 127.
    lines = data[:64].split(b"\n")
    if not re.fullmatch(rb"%PDF-1\.[0-7]\r?", lines[0]):
        found.append(f"6.1.2: the file starts with {lines[0][:10]!r}, not a PDF 1.x header")
    if len(lines) < 2 or not lines[1].startswith(b"%") or sum(byte > 127 for byte in lines[1][1:5]) < 4:
        found.append("6.1.2: the header is not followed by a comment of four bytes above 127")
    reader = PdfFileReader(io.BytesIO(data), strict=False)
    trailer = reader.trailer_view
    # 6.1.3: a file identifier, and no encryption.
    if "/Encrypt" in trailer:
        found.append("6.1.3: the trailer has /Encrypt: the file is encrypted")
        return found  # nothing else can be read as a reader without the password would
    identifier = _get(trailer, "/ID")
    if not isinstance(identifier, generic.ArrayObject) or len(identifier) != 2:
        found.append("6.1.3: the trailer has no /ID of two strings")
    reachable = list(_reachable(trailer))
    objects = [value for _, value in reachable]
    root = reader.root
    found += _metadata(root, trailer)
    found += _output_intents(root)
    for value in objects:
        found += _font(value)
        found += _annotation(value)
        found += _action(value)
        found += _stream(value)
    found += _associated_files(root, reachable)
    for key in ("/AA",):
        if key in root:
            found.append("6.5.2: the catalogue has additional actions (/AA)")
    if "/Names" in root and "/JavaScript" in root["/Names"]:
        found.append("6.5.1: the catalogue names JavaScript")
    return found


Reference = tuple[int, int] | None


def _reachable(trailer: generic.DictionaryObject) -> Iterator[tuple[Reference, generic.PdfObject]]:
    """Every dictionary, array and stream reachable from the trailer, once each, with its object
    number and generation (None for a direct object)."""
    seen: set[tuple[int, int]] = set()
    stack: list[Any] = [trailer]
    while stack:
        value = stack.pop()
        reference: Reference = None
        if isinstance(value, generic.IndirectObject):
            reference = (value.idnum, value.generation)
            if reference in seen:
                continue
            seen.add(reference)
            value = value.get_object()
        if isinstance(value, generic.DictionaryObject):  # streams too
            yield reference, value
            stack.extend(value.raw_get(name) for name in value)
        elif isinstance(value, generic.ArrayObject):
            yield reference, value
            stack.extend(value.raw_get(index) for index in range(len(value)))


def _get(container: Any, key: str, default: Any = None) -> Any:
    """``container[key]`` resolved (pyHanko's ``get`` leaves an indirect reference as it is)."""
    return container[key] if key in container else default  # noqa: SIM401 (get would not resolve it)


def _text(element: ElementTree.Element | None) -> str | None:
    """An XMP property's value: text, or the first rdf:li of an Alt/Seq/Bag."""
    if element is None:
        return None
    item = element.find(".//rdf:li", NS)
    return (item.text if item is not None else element.text) or ""


def _property(description: list[ElementTree.Element], prefix: str, name: str) -> str | None:
    qualified = f"{{{NS[prefix]}}}{name}"
    for node in description:
        if qualified in node.attrib:
            return node.attrib[qualified]
        element = node.find(f"{prefix}:{name}", NS)
        if element is not None:
            return _text(element)
    return None


def _metadata(root: generic.DictionaryObject, trailer: generic.DictionaryObject) -> list[str]:
    found: list[str] = []
    stream = _get(root, "/Metadata")
    if not isinstance(stream, generic.StreamObject):
        return ["6.6.2.1: the catalogue has no /Metadata stream"]
    if _get(stream, "/Type") != "/Metadata" or _get(stream, "/Subtype") != "/XML":
        found.append("6.6.2.1: the metadata stream is not /Type /Metadata, /Subtype /XML")
    text = stream.data.decode("utf-8")
    try:
        packet = ElementTree.fromstring(  # noqa: S314 (a file these tests made)
            text[text.index("<x:xmpmeta") : text.rindex("</x:xmpmeta>") + 12]
        )
    except (ValueError, ElementTree.ParseError) as exc:
        return [*found, f"6.6.2.1: the XMP packet is not well-formed XML: {exc}"]
    description = packet.findall(".//rdf:Description", NS)
    part, conformance = _property(description, "pdfaid", "part"), _property(description, "pdfaid", "conformance")
    if (part, conformance) != ("3", "B"):
        found.append(f"6.6.4: XMP identifies PDF/A part {part!r}, conformance {conformance!r}, not 3 and B")
    # What a reader of the Info dictionary and of the XMP sees must agree (ISO 19005-1 6.7.3, which
    # validators also apply to PDF/A-3: pyHanko's first signature used to break it for /Producer).
    info = _get(trailer, "/Info")
    if isinstance(info, generic.DictionaryObject):
        pairs = {
            "/Title": ("dc", "title"),
            "/Author": ("dc", "creator"),
            "/Subject": ("dc", "description"),
            "/Creator": ("xmp", "CreatorTool"),
            "/Producer": ("pdf", "Producer"),
        }
        for key, (prefix, name) in pairs.items():
            if key in info and str(info[key]) != _property(description, prefix, name):
                found.append(
                    f"Info {key} {str(info[key])!r} differs from XMP {prefix}:{name} "
                    f"{_property(description, prefix, name)!r}"
                )
    return found


def _output_intents(root: generic.DictionaryObject) -> list[str]:
    intents = _get(root, "/OutputIntents")
    if not isinstance(intents, generic.ArrayObject) or not intents:
        return ["6.2.2: the catalogue has no /OutputIntents"]
    found: list[str] = []
    profiles = set()
    for intent in intents:
        if _get(intent, "/S") != "/GTS_PDFA1":
            continue
        profile = _get(intent, "/DestOutputProfile")
        if not isinstance(profile, generic.StreamObject):
            found.append("6.2.2: the PDF/A output intent has no /DestOutputProfile stream")
            continue
        icc = profile.data
        profiles.add(icc)
        # An ICC profile: "acsp" at byte 36; the content is DeviceRGB, so an RGB profile with /N 3.
        if icc[36:40] != b"acsp":
            found.append("6.2.2: the output intent's profile is not an ICC profile")
        if icc[16:20] != b"RGB " or _get(profile, "/N") != 3:
            found.append(f"6.2.2: the output intent's profile is {icc[16:20]!r} with /N {_get(profile, '/N')}, not RGB")
    if not profiles:
        found.append("6.2.2: no output intent has /S /GTS_PDFA1")
    if len(profiles) > 1:
        found.append("6.2.2: the output intents carry different profiles")
    return found


def _font(value: generic.PdfObject) -> list[str]:
    if not isinstance(value, generic.DictionaryObject) or _get(value, "/Type") != "/Font":
        return []
    subtype, name = _get(value, "/Subtype"), str(_get(value, "/BaseFont", "?"))
    if subtype == "/Type3":
        return []  # glyphs drawn by content streams: nothing to embed
    described = value["/DescendantFonts"][0] if subtype == "/Type0" else value
    descriptor = _get(described, "/FontDescriptor")
    if not isinstance(descriptor, generic.DictionaryObject):
        return [f"6.2.11.4.1: font {name} has no font descriptor, so no embedded program"]
    if not any(key in descriptor for key in ("/FontFile", "/FontFile2", "/FontFile3")):
        return [f"6.2.11.4.1: font {name} is not embedded"]
    return []


def _annotation(value: generic.PdfObject) -> list[str]:
    if not isinstance(value, generic.DictionaryObject) or "/Rect" not in value or "/Subtype" not in value:
        return []
    if _get(value, "/Type", "/Annot") != "/Annot":
        return []
    subtype = str(value["/Subtype"])
    label = f"{subtype} annotation {_get(value, '/T', '')!s}".strip()
    found: list[str] = []
    if subtype == "/Popup":
        return found
    flags = _get(value, "/F")
    if not isinstance(flags, int):
        found.append(f"6.3.2: {label} has no /F flags")
    elif not flags & PRINT or flags & NOT_SHOWN:
        found.append(f"6.3.2: {label} has flags {flags}: not printed, or hidden")
    appearance = _get(value, "/AP")
    x1, y1, x2, y2 = (float(item) for item in value["/Rect"])
    if appearance is None and subtype != "/Link" and (x1, y1) != (x2, y2):
        found.append(f"6.3.3: {label} has no appearance")
    if isinstance(appearance, generic.DictionaryObject) and set(appearance) != {"/N"}:
        found.append(f"6.3.3: {label}'s appearance has {sorted(appearance)}, not /N only")
    return found


def _action(value: generic.PdfObject) -> list[str]:
    if (
        isinstance(value, generic.DictionaryObject)
        and _get(value, "/S") in FORBIDDEN_ACTIONS
        and _get(value, "/Type", "/Action") == "/Action"
    ):
        return [f"6.5.1: a {value['/S']} action"]
    return []


def _stream(value: generic.PdfObject) -> list[str]:
    if not isinstance(value, generic.StreamObject):
        return []
    found = [
        f"6.1.7: a stream has {key} (external data)" for key in ("/F", "/FFilter", "/FDecodeParms") if key in value
    ]
    filters = _get(value, "/Filter")
    names = list(filters) if isinstance(filters, generic.ArrayObject) else [filters]
    if "/LZWDecode" in names:
        found.append("6.1.7.2: a stream is LZW-compressed")
    return found


def _associated_files(
    root: generic.DictionaryObject, reachable: list[tuple[Reference, generic.PdfObject]]
) -> list[str]:
    found: list[str] = []
    names = _get(_get(root, "/Names", {}), "/EmbeddedFiles")
    named = _get(names, "/Names", generic.ArrayObject()) if isinstance(names, generic.DictionaryObject) else []
    listed = _get(root, "/AF", generic.ArrayObject())
    associated = [
        (item.idnum, item.generation) if isinstance(item, generic.IndirectObject) else None for item in listed.iterate()
    ]
    if len(set(associated)) != len(associated):
        found.append("6.8: the catalogue's /AF lists a file twice")
    specifications = [
        (reference, value)
        for reference, value in reachable
        if isinstance(value, generic.DictionaryObject) and _get(value, "/Type") == "/Filespec" and "/EF" in value
    ]
    if len(specifications) != len(named) // 2:
        found.append(f"6.8: {len(specifications)} embedded files, {len(named) // 2} named in /EmbeddedFiles")
    for reference, specification in specifications:
        label = str(_get(specification, "/UF", _get(specification, "/F", "?")))
        if "/F" not in specification or "/UF" not in specification:
            found.append(f"6.8: embedded file {label} has no /F and /UF names")
        if _get(specification, "/AFRelationship") not in AF_RELATIONSHIPS:
            found.append(f"6.8: embedded file {label} has no valid /AFRelationship")
        if reference not in associated:
            found.append(f"6.8: embedded file {label} is not an associated file of the document (/AF)")
        stream = _get(specification["/EF"], "/F")
        if not isinstance(stream, generic.StreamObject) or "/Subtype" not in stream:
            found.append(f"6.8: embedded file {label} has no MIME type (/Subtype)")
        elif "/ModDate" not in _get(stream, "/Params", {}):
            found.append(f"6.8: embedded file {label} has no modification date (/Params /ModDate)")
    return found
