"""The session's pool of RSA keys (tests/conftest.py puts it in place of reports.signing.new_private_key)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from auditportal.reports import signing

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import rsa


class KeyPool:
    """RSA keys made once per test session and handed out again in every test, in the same order.

    Making a key is most of the cost of a certificate authority (a fraction of a second for a 2048-bit
    key, a second or more for a 3072-bit one), and a signed report needs four. A test gets the pool's
    first key, then its second...: distinct keys within the test (a rotation still gets a new key), the
    same ones as the test before (whose rows were rolled back). Keys have the size signing.KEY_SIZE has
    when asked (the report tests make 2048-bit keys).
    """

    def __init__(self, make: Callable[[], rsa.RSAPrivateKey]) -> None:
        self.make = make  # a new key, not the pool's
        self._keys: dict[int, list[rsa.RSAPrivateKey]] = {}
        self._taken: dict[int, int] = {}

    def restart(self) -> None:
        self._taken.clear()

    def take(self) -> rsa.RSAPrivateKey:
        size = signing.KEY_SIZE
        keys = self._keys.setdefault(size, [])
        index = self._taken.get(size, 0)
        if index == len(keys):
            keys.append(self.make())
        self._taken[size] = index + 1
        return keys[index]
