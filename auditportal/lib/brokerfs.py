"""kombu's filesystem transport, with messages that appear whole.

The embedded default's broker (``CELERY_BROKER_URL=filesystem://``: ``make run``, the test suite) is
kombu's filesystem transport: a producer creates the message's file in the queue folder and then
writes it, while a consumer lists the folder, moves what it finds and reads it, without the
producer's lock. A consumer that lists the folder between the two reads an empty file, and kombu
5.7's ``_get`` then raises ``JSONDecodeError`` from the worker's event loop: the worker stops
("Unrecoverable error"), and what it would have run is never run. Seen under the suite: an embedded
beat queued a poll while the same worker looked for work every 20 ms, and an experiment never
finished.

Here a message is written under a name no queue reads (``.part`` after ``.msg``) and renamed into
place: a rename within one folder is atomic, so a consumer sees no file or the whole file. The rest
is kombu's. ``auditportal/celery.py`` registers this class as the ``filesystem`` transport, so the
URL and its options stay as documented (README, settings/base.py).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

# The suffix of a message being written: after ``<queue>.msg``, so that kombu's readers, which match
# the part of the name after its first dot against ``<queue>.msg`` exactly, never take it.
PARTIAL = ".part"


class Channel(filesystem.Channel):  # type: ignore[misc]
    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]  # kombu names it message in the base
        """Put ``payload`` onto ``queue``: written aside, then renamed into the queue folder."""
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + PARTIAL
        try:
            with open(partial, "wb") as handle:
                handle.write(str_to_bytes(dumps(payload)))  # type: ignore[no-untyped-call]
            os.replace(partial, final)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.remove(partial)
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):  # type: ignore[misc]
    Channel = Channel
