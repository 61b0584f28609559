"""nats-py's `tests/test_micro_service.py` (nats-py 2.14.0), ported by deleting ``await``."""

from __future__ import annotations

import natspy_port

NATS_PY_FILE = "test_micro_service.py"

natspy_port.collect(NATS_PY_FILE, globals())
