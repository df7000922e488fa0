"""The error a bad dataset file raises: the file, row and column at fault, and what to do."""

from __future__ import annotations

from auditportal.fairness.errors import UserError


class DatasetError(UserError):
    """A problem with the file the user must fix; str() is the full user-facing message.

    ``field`` is the column at fault (None for the whole file)."""

    def __init__(self, message: str, *, file: str, row: int | None = None, column: str | None = None) -> None:
        self.file = file
        self.row = row
        self.column = column
        super().__init__(message, field=column)
        self.args = (str(self),)

    def __str__(self) -> str:
        where = [self.file]
        if self.row is not None:
            where.append(f"row {self.row}")
        if self.column is not None:
            where.append(f"column {quote(self.column)}")
        return f"{', '.join(where)}: {self.message}"

    # Keyword-only arguments break the default exception pickling that Celery relies on.
    def __reduce__(self) -> tuple[object, tuple[str, str, int | None, str | None]]:
        return (_rebuild_dataset_error, (self.message, self.file, self.row, self.column))


class DecodedSizeError(DatasetError):
    """The columns read would take more than the decompressed-size limit once decoded."""


def _rebuild_dataset_error(message: str, file: str, row: int | None, column: str | None) -> DatasetError:
    return DatasetError(message, file=file, row=row, column=column)


def escape(text: str) -> str:
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def quote(text: str, limit: int = 80) -> str:
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return f"'{escape(text)}'"
