"""Answers a page's POST gives."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponseRedirect
from django.shortcuts import resolve_url


class HttpResponseSeeOther(HttpResponseRedirect):
    status_code = 303


def see_other(to: Any, *args: Any, **kwargs: Any) -> HttpResponseSeeOther:
    """303 See Other to ``to`` (a URL, a URL's name with its arguments, or a model): after a form's POST,
    the browser GETs the page, so the address bar shows the page's own URL and a reload posts nothing
    again, whether the action was done or refused (its message says which)."""
    return HttpResponseSeeOther(resolve_url(to, *args, **kwargs))
