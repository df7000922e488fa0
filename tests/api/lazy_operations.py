"""Schemathesis builds each operation's Hypothesis test when it collects it: the explicit examples and
the coverage cases it derives from the schema (about 5 s of CPU for the API's 70 operations). Every
xdist worker collects every test, and a worker runs only the tests it is dealt, so each paid for all
70 builds, and ``-m "not slow"`` (the fuzzer is slow) for builds it never ran.

Here the fuzzer's items are collected as Schemathesis collects them (same names, node ids, markers,
fixtures), each holding a stand-in with the built test's signature and marks; the test is built in
the item's setup, before its fixtures, with the same inputs as at collection (the schema, its
operation, the feedback sources of the collection; Schemathesis seeds its own example draws), so a
test runs the same examples as before, and a build that fails fails that test.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Generator
from typing import Any

import pytest
from schemathesis.core.result import Ok
from schemathesis.pytest._test_builder import build_operation_test
from schemathesis.pytest.plugin import SchemathesisCase, SchemathesisFunction

Build = Callable[[], Callable[..., Any]]
_BUILD = pytest.StashKey[Build]()


class LazySchemathesisCase(SchemathesisCase):
    def _gen_items(self, result: Any, feedback: Any) -> Generator[SchemathesisFunction, None, None]:
        if self.is_invalid_test or not isinstance(result, Ok):
            yield from super()._gen_items(result, feedback)  # an error item, as Schemathesis makes it
            return
        operation = result.ok()
        build: Build = functools.partial(
            build_operation_test,
            config=self.schema.config,
            operation=operation,
            test_func=self.test_function,
            given_kwargs=self.given_kwargs,
            feedback=feedback,
        )
        name = self._get_test_name(operation)
        for item in self._make_items(_stand_in(self.test_function), name, operation.label, operation.tags):
            item.stash[_BUILD] = build
            # Its own node id, the operation as its parameter (test_every_operation…[GET /api/v1/…]):
            # Schemathesis gives every item the test function's name as originalname, from which
            # pytest 9 builds the node id, so the 70 operations shared one, and xdist's loadgroup
            # scheduler (which deals tests by node id) ran one of them.
            item._id = self.parent.id.child(self.name).with_params(operation.label)  # type: ignore[union-attr]
            yield item


def _stand_in(test_function: Callable[..., Any]) -> Callable[..., Any]:
    """What collection reads of the built test: its signature (Hypothesis takes ``case``), its marks
    and attributes (the test function's), and that it is a Hypothesis test (the ``hypothesis`` marker)."""

    @functools.wraps(test_function)
    def not_built(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the operation's test is built in the item's setup")

    signature = inspect.signature(test_function)
    not_built.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[parameter for name, parameter in signature.parameters.items() if name != "case"]
    )
    not_built.is_hypothesis_test = True  # type: ignore[attr-defined]
    return not_built


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> Generator[Any, Any, Any]:
    result = yield
    if type(result) is SchemathesisCase:
        return LazySchemathesisCase.from_parent(collector, test_function=obj, name=name, schema=result.schema)
    return result


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    build = item.stash.get(_BUILD, None)
    if build is not None and isinstance(item, pytest.Function):
        del item.stash[_BUILD]
        built = build()
        item._obj = built  # type: ignore[attr-defined]  # what pytest calls, and the Hypothesis plugin reads
        item.keywords.update(built.__dict__)
