"""The one base class for everything a user can get wrong.

Services raise a subclass; the API's exception handler maps it to HTTP 400 and forms map it to a
form error on ``field`` (or a non-field error when ``field`` is None), both with ``message``.
"""

from __future__ import annotations


class UserError(ValueError):
    """A problem the user must fix. ``message`` is what they read; ``field`` names the form field,
    API field or command option at fault, when there is one."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.message = message
        self.field = field
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only arguments break the default exception pickling that Celery relies on.
        return (_rebuild, (type(self), self.message, self.field))


def _rebuild(cls: type[UserError], message: str, field: str | None) -> UserError:
    error = cls.__new__(cls)
    UserError.__init__(error, message, field=field)
    return error
