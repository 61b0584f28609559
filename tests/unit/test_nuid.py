"""NUID: 22 base62 characters, unique, thread-safe; inbox subjects built from it."""

from __future__ import annotations

import re
import string
import threading
from typing import List

from jetstream_sync import _nuid
from jetstream_sync._nuid import NUID, new_inbox
from jetstream_sync._protocol import check_publish_subject, check_subscribe_subject

BASE62 = re.compile(r"\A[0-9A-Za-z]{22}\Z")


def test_alphabet_is_base62() -> None:
    assert sorted(_nuid._DIGITS) == sorted(string.digits + string.ascii_letters)
    assert len(set(_nuid._DIGITS)) == 62


def test_ids_are_22_base62_characters() -> None:
    n = NUID()
    for _ in range(1000):
        assert BASE62.match(n.next())


def test_100k_ids_are_unique() -> None:
    n = NUID()
    ids = [n.next() for _ in range(100_000)]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 22 for i in ids)


def test_ids_from_one_generator_share_a_prefix_until_rollover() -> None:
    n = NUID()
    a, b = n.next(), n.next()
    assert a[:12] == b[:12]
    assert a[12:] != b[12:]


def test_sequence_rollover_picks_a_new_prefix() -> None:
    n = NUID()
    n._seq = _nuid._MAX_SEQ - 1  # the next step overflows the 10-character sequence
    before = n._prefix
    after = n.next()
    assert BASE62.match(after)
    assert n._seq < _nuid._MAX_SEQ
    assert after[:12] == n._prefix
    # A fresh 12-character random prefix equals the old one with probability 62**-12.
    assert after[:12] != before


def test_separate_generators_differ() -> None:
    assert NUID().next()[:12] != NUID().next()[:12]


def test_thread_safe_unique_ids() -> None:
    n = NUID()
    per_thread = 20_000
    results: List[List[str]] = [[] for _ in range(4)]
    start = threading.Barrier(4)

    def work(out: List[str]) -> None:
        start.wait(timeout=10)
        out.extend(n.next() for _ in range(per_thread))

    threads = [threading.Thread(target=work, args=(r,)) for r in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive()
    all_ids = [i for r in results for i in r]
    assert len(all_ids) == 4 * per_thread
    assert len(set(all_ids)) == len(all_ids)
    assert all(BASE62.match(i) for i in all_ids)


def test_new_inbox_format() -> None:
    inbox = new_inbox()
    prefix, _, nuid = inbox.partition(".")
    assert prefix == "_INBOX"
    assert BASE62.match(nuid)
    assert check_publish_subject(inbox) == inbox
    assert check_subscribe_subject(inbox + ".*") == inbox + ".*"


def test_new_inbox_custom_prefix_and_uniqueness() -> None:
    inbox = new_inbox("_R_.app")
    assert re.fullmatch(r"_R_\.app\.[0-9A-Za-z]{22}", inbox)
    inboxes = {new_inbox() for _ in range(10_000)}
    assert len(inboxes) == 10_000
