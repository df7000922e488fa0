"""The embedded default's broker: kombu's filesystem transport with messages that appear whole
(auditportal/lib/brokerfs.py). kombu's own creates a message's file before writing it, and a consumer
that lists the folder in between reads an empty file and stops the worker; here the consumer looks at
that very moment and finds nothing, then the whole message."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from queue import Empty
from typing import Any, cast

import pytest
from kombu.connection import Connection
from kombu.transport import filesystem

import auditportal.celery  # noqa: F401  registers the filesystem transport
from auditportal.lib import brokerfs


def _open(tmp_path: Path, **kwargs: Any) -> Any:
    """A connection on a queue folder of the test's own (kombu is untyped: Any)."""
    folder = tmp_path / "queue"
    folder.mkdir()
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder), "store_processed": False}
    return cast(Any, Connection)(transport_options=options, **kwargs)


@pytest.fixture
def connection(tmp_path: Path) -> Iterator[Any]:
    with _open(tmp_path, hostname="filesystem://") as opened:
        yield opened


def test_filesystem_urls_open_the_transport_whose_messages_appear_whole(connection: Any) -> None:
    assert isinstance(connection.transport, brokerfs.Transport)
    with connection.SimpleQueue("work") as queue:
        queue.put({"task": "x", "n": 1})
        assert queue.get(timeout=1).payload == {"task": "x", "n": 1}


def test_a_consumer_looking_while_a_message_is_written_finds_nothing_then_the_whole_message(
    connection: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    channel = connection.default_channel
    seen: list[Any] = []
    replace = os.replace

    def look_then_replace(source: str, target: str) -> None:
        # The message is written, not yet in place: a consumer sees no message for the queue.
        assert Path(source).stat().st_size > 0
        with pytest.raises(Empty):
            channel._get("work")
        seen.append(source)
        replace(source, target)

    monkeypatch.setattr(os, "replace", look_then_replace)
    channel._put("work", {"body": "whole"})
    assert len(seen) == 1
    assert channel._get("work") == {"body": "whole"}
    assert not list(Path(channel.data_folder_in).iterdir())  # nothing left behind, no .part file


def test_kombus_own_transport_lets_a_consumer_read_a_message_before_it_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Why brokerfs exists: kombu's _put opens the file, locks it (a lock readers do not take) and then
    writes; a consumer in between takes the empty file and fails to decode it."""
    with _open(tmp_path, transport=filesystem.Transport) as plain:
        channel = plain.default_channel
        failures: list[Exception] = []
        lock: Any = filesystem.lock

        def lock_then_look(handle: Any, flags: int) -> None:
            lock(handle, flags)
            try:
                channel._get("work")
            except json.JSONDecodeError as exc:
                failures.append(exc)

        monkeypatch.setattr(filesystem, "lock", lock_then_look)
        channel._put("work", {"body": "whole"})
        assert len(failures) == 1
