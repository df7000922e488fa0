"""A static files finder for the few files the portal serves from installed packages.

plotly.js ships inside the ``plotly`` Python package (``plotly/package_data/plotly.min.js``); the
pages load it from ``static/vendor/plotly/plotly.min.js``, found here and copied by
``collectstatic`` like any other static file, so the portal works offline and never uses a CDN.
Only the files listed are exposed, not the rest of the package's data.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from django.contrib.staticfiles.finders import BaseFinder
from django.core.checks import CheckMessage, Error
from django.core.files.storage import FileSystemStorage

# static path -> (package, file inside the package's folder)
PACKAGE_FILES: dict[str, tuple[str, str]] = {
    "vendor/plotly/plotly.min.js": ("plotly", "package_data/plotly.min.js"),
}


def package_file(package: str, relative: str) -> Path | None:
    """The file inside an installed package's folder, located without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        return None
    candidate = Path(spec.origin).parent / relative
    return candidate if candidate.is_file() else None


class PackageFileFinder(BaseFinder):
    def check(self, **kwargs: Any) -> list[CheckMessage]:
        return [
            Error(f"{package} does not hold {relative} (needed as static/{path})", id="auditportal.E001")
            for path, (package, relative) in PACKAGE_FILES.items()
            if package_file(package, relative) is None
        ]

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> Any:
        found: list[str] = []
        if path in PACKAGE_FILES:
            located = package_file(*PACKAGE_FILES[path])
            if located is not None:
                found.append(str(located))
        if find_all:
            return found
        return found[0] if found else []

    def list(self, ignore_patterns: Any) -> Any:
        for path, (package, relative) in PACKAGE_FILES.items():
            located = package_file(package, relative)
            if located is None:
                continue
            storage = FileSystemStorage(location=str(located.parent))
            # collectstatic copies storage.path(name) to the prefixed path below.
            storage.prefix = str(Path(path).parent)  # type: ignore[attr-defined]
            yield located.name, storage
