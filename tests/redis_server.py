"""A private Redis server, for tests that stop the broker and start it again.

Never the shared Redis on 6379 (other test runs and services use it): a ``redis-server`` of its own
on a free port, without persistence (a restart empties it, as a crashed broker without an
append-only file would be). Import the fixture into the test module to use it as ``private_redis``:
``from tests.redis_server import private_redis_fixture``. ``celery_broker(url)`` points this process's
Celery app at it; a worker gets ``CELERY_BROKER_URL=private_redis.url`` (tests/worker.py).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from auditportal.celery import app
from tests.browser.conftest import require_system_tool


@dataclass
class PrivateRedis:
    binary: str
    port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server (again, on the same port) and wait until it answers PING."""
        assert self.process is None, "already running"
        log = self.directory / "redis-server.log"
        with log.open("ab") as output:
            self.process = subprocess.Popen(
                [
                    self.binary,
                    *("--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory)),
                    *("--save", "", "--appendonly", "no", "--daemonize", "no"),
                ],
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1)
        deadline = time.monotonic() + 15
        while True:
            try:
                client.ping()
                return
            except redis.ConnectionError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    pytest.fail(f"redis-server on port {self.port} did not start:\n{log.read_text()}")
                time.sleep(0.05)
            finally:
                client.close()

    def stop(self) -> None:
        """Stop the server; whatever it held is gone (no persistence)."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(name="private_redis")
def private_redis_fixture(tmp_path: Path) -> Iterator[PrivateRedis]:
    binary = shutil.which("redis-server")
    if binary is None:
        require_system_tool("redis-server is not installed (apt-get install redis-server)")
        raise AssertionError("unreachable")  # require_system_tool skips or fails
    directory = tmp_path / "redis"
    directory.mkdir()
    server = PrivateRedis(binary=binary, port=_free_port(), directory=directory)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def celery_broker(url: str) -> Iterator[None]:
    """This process's Celery app sends to ``url`` inside the block, and to the test settings' broker
    after it. The app caches its connection and producer pools on first use: both are dropped on the
    way in and out, as Celery does after a fork. (Celery reads ``broker_url`` from the environment's
    CELERY_BROKER_URL before its configuration, as the PostgreSQL + Redis run sets it; the write URL,
    which is what sending uses, is taken from the configuration first.)"""
    assert "CELERY_BROKER_WRITE_URL" not in os.environ, "it would override the broker of the block"
    before = {
        "broker_write_url": app.conf.get("broker_write_url"),
        "broker_transport_options": app.conf.broker_transport_options,
    }
    app.conf.update(broker_write_url=url, broker_transport_options={})
    _drop_pools()
    try:
        yield
    finally:
        app.conf.update(before)
        _drop_pools()


def _drop_pools() -> None:
    # Dropped, not closed: kombu keeps each pool in a registry by connection URL, and hands a closed
    # one back to whoever asks for that URL again.
    app._pool = None
    amqp = app.__dict__.get("amqp")
    if amqp is not None:
        amqp._producer_pool = None
