"""Benchmarks against nats-py and pynats2 (see README.md in this folder).

Each script imports its helpers as the top-level module ``_harness``. Run as a script
(``python benchmarks/X.py``), this folder is on ``sys.path`` already; run as a module
(``python -m benchmarks.X``), this package is imported first and puts it there.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
