"""nats-py's own test files, ported by deleting ``await`` (see natspy_port), marked with what
natspy_expected says of each test."""

from __future__ import annotations

import os
from typing import List

import pytest
from natspy_expected import (
    DIFFERENT,
    FAILS_ON_NATS_PY,
    PORT_LIMITS,
    RACY_AFTER_PORT,
    SKIPPED,
    SUBTESTS,
    TO_FIX,
)


def _key(item: pytest.Item) -> str:
    # "test_js.py::PublishTest::test_publish": nats-py's file, class and test
    module = item.module.__name__ if item.module is not None else ""
    source = getattr(item.module, "NATS_PY_FILE", module)
    cls = item.cls.__name__ if item.cls is not None else ""
    return f"{source}::{cls}::{item.name}"


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    if os.environ.get("NATSPY_RUN") == "nats-py":
        return  # the baseline: nats-py's own results, unmarked
    for item in items:
        if getattr(item.module, "NATS_PY_FILE", None) is None:
            continue
        key = _key(item)
        if key in SKIPPED:
            item.add_marker(pytest.mark.skip(reason=SKIPPED[key]))
        elif key in RACY_AFTER_PORT:
            item.add_marker(pytest.mark.skip(reason=RACY_AFTER_PORT[key]))
        elif key in SUBTESTS and key in DIFFERENT:
            item.add_marker(pytest.mark.skip(reason=f"deliberate (subtests): {DIFFERENT[key]}"))
        elif key in FAILS_ON_NATS_PY:
            item.add_marker(pytest.mark.xfail(strict=True, reason=FAILS_ON_NATS_PY[key]))
        elif key in PORT_LIMITS:
            item.add_marker(pytest.mark.xfail(strict=True, reason=f"port: {PORT_LIMITS[key]}"))
        elif key in DIFFERENT:
            item.add_marker(pytest.mark.xfail(strict=True, reason=f"deliberate: {DIFFERENT[key]}"))
        elif key in TO_FIX:
            item.add_marker(pytest.mark.xfail(strict=True, reason=f"to fix: {TO_FIX[key]}"))
