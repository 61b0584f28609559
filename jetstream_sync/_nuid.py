"""Fast unique ids for inboxes: a random prefix plus a sequence with a random step.

The same scheme as NATS' NUID (12 random base62 characters, then a 10-character sequence);
unique enough across processes without coordination, cheap enough to call per request.
"""

from __future__ import annotations

import secrets
import threading

__all__ = ["NUID", "new_inbox"]

_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_BASE = len(_DIGITS)
_PREFIX_LEN = 12
_SEQ_LEN = 10
_MAX_SEQ = _BASE**_SEQ_LEN
_MIN_INC, _MAX_INC = 33, 333


class NUID:
    """Thread-safe generator of 22-character unique ids."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._randomize()

    def _randomize(self) -> None:
        self._prefix = "".join(secrets.choice(_DIGITS) for _ in range(_PREFIX_LEN))
        self._seq = secrets.randbelow(_MAX_SEQ)
        self._inc = _MIN_INC + secrets.randbelow(_MAX_INC - _MIN_INC)

    def next(self) -> str:
        """A new unique id."""
        with self._lock:
            self._seq += self._inc
            if self._seq >= _MAX_SEQ:
                self._randomize()
            seq = self._seq
            prefix = self._prefix
        tail = []
        for _ in range(_SEQ_LEN):
            seq, d = divmod(seq, _BASE)
            tail.append(_DIGITS[d])
        return prefix + "".join(reversed(tail))


_GLOBAL = NUID()


def new_inbox(prefix: str = "_INBOX") -> str:
    """A fresh inbox subject, ``<prefix>.<nuid>``."""
    return f"{prefix}.{_GLOBAL.next()}"
