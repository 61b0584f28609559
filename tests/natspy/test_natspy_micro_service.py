"""nats-py's `tests/test_micro_service.py` (nats-py 2.14.0), ported by deleting ``await``."""

from __future__ import annotations

import natspy_port
import pytest

NATS_PY_FILE = "test_micro_service.py"

try:
    _source = (natspy_port.tests_dir() / NATS_PY_FILE).read_text()
except natspy_port.Unavailable as exc:
    pytest.skip(f"nats-py's tests could not be had: {exc}", allow_module_level=True)
_missing = [] if natspy_port.on_nats_py() else natspy_port.missing_modules(_source)
if _missing:
    pytest.skip(f"jetstream_sync has no {', '.join(_missing)} yet", allow_module_level=True)
globals().update(
    {k: v for k, v in natspy_port.load(NATS_PY_FILE, __name__).items() if not k.startswith("__")}
)
