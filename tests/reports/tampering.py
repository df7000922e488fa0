# pyHanko's writer methods carry no annotations.
# mypy: disable-error-code="no-untyped-call"
"""Ways to change a signed PDF after the fact, for the verification tests."""

from __future__ import annotations

import io

from pyhanko.pdf_utils import generic
from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter


def flip_byte(data: bytes) -> bytes:
    """One bit flipped in the title the first revision's Info dictionary holds: the file still parses,
    and every signature covers that byte ("Fairness" becomes "Gairness")."""
    position = data.index(b"/Title (Fairness") + len(b"/Title (")
    changed = bytearray(data)
    changed[position] ^= 0x01
    return bytes(changed)


def draw_on_page(data: bytes, page: int = 0) -> bytes:
    """An appended revision that paints a red box over the first page, as someone might hide a number."""
    writer = IncrementalPdfFileWriter(io.BytesIO(data))
    stream = generic.StreamObject(stream_data=b"q 1 0 0 rg 100 600 200 80 re f Q")
    writer.add_stream_to_page(page, writer.add_object(stream))
    output = io.BytesIO()
    writer.write(output)
    return output.getvalue()


def remove_signature(data: bytes, field: str) -> bytes:
    """An appended revision that takes the signature field ``field`` out of the form and its page."""
    writer = IncrementalPdfFileWriter(io.BytesIO(data))
    acroform = writer.root["/AcroForm"]
    fields = acroform["/Fields"]
    kept = generic.ArrayObject()
    removed: list[generic.Reference] = []
    for reference in fields:
        if str(reference.get_object().get("/T")) == field:
            removed.append(reference.reference)
        else:
            kept.append(reference)
    assert removed, f"no field {field!r}"
    acroform["/Fields"] = kept
    writer.update_container(acroform)
    for page_index in range(len(writer.root["/Pages"]["/Kids"])):
        page_ref, _ = writer.find_page_for_modification(page_index)
        page = page_ref.get_object()
        annotations = page.get("/Annots")
        if annotations is None:
            continue
        remaining = generic.ArrayObject(item for item in annotations if item.reference not in removed)
        if len(remaining) != len(annotations):
            page["/Annots"] = remaining
            writer.update_container(page)
    output = io.BytesIO()
    writer.write(output)
    return output.getvalue()
