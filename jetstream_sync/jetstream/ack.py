"""JetStream message metadata and acknowledgements (ADR-15's "JS Ack" rules).

The rules live in the core module ``_jsack.py``: ``Msg``'s ack methods and
``metadata`` are built on them, and the core imports nothing from ``jetstream/``. This
module re-exports its names, so imports from here work as they always did.
"""

from __future__ import annotations

from .._jsack import ACK, NAK, TERM, WPI, MsgMetadata, SequencePair, parse_metadata

# Not public (not in __all__), but importable from here as before; "as" marks them as
# re-exported for type checkers.
from .._jsack import ACK_DONE as ACK_DONE
from .._jsack import ACK_NONE as ACK_NONE
from .._jsack import ACK_OPEN as ACK_OPEN
from .._jsack import ack_sync as ack_sync
from .._jsack import nak_payload as nak_payload
from .._jsack import send_ack as send_ack
from .._jsack import sequences as sequences
from .._jsack import term_payload as term_payload

__all__ = ["ACK", "NAK", "TERM", "WPI", "MsgMetadata", "SequencePair", "parse_metadata"]
