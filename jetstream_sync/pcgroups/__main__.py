"""``python -m jetstream_sync.pcgroups``: see :mod:`jetstream_sync.pcgroups.cli`."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
