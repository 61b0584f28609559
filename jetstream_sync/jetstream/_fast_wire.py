"""The fast-ingest wire (ADR-50) as pure functions: the reply subjects a batch's messages
carry, and what the server answers on them, read from bytes (no connection here).

A reply subject is ``<inbox>.<flow>.<gap>.<batch seq>.<operation>.$FI``; the server reads
it from the right (nats-server's ``getFastBatch``), so the inbox may hold dots and its last
token is the batch id. The answers: BatchFlowAck ``{"type":"ack","seq":N,"msgs":M}``,
BatchFlowGap ``{"type":"gap","last_seq":L,"seq":N}``, BatchFlowErr
``{"type":"err","seq":N,"error":{...}}``, and the final PubAck (``batch``, ``count``) or
the error of a refusal.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple, Union

from .. import errors
from . import api

__all__ = [
    "GAP_MODES",
    "MAX_FLOW",
    "MAX_OUTSTANDING_ACKS",
    "OP_APPEND",
    "OP_COMMIT",
    "OP_COMMIT_EOB",
    "OP_PING",
    "OP_START",
    "FlowAck",
    "FlowErr",
    "FlowGap",
    "Reply",
    "check_flow",
    "check_max_outstanding",
    "parse_reply",
    "reply_head",
    "reply_subject",
]

OP_START, OP_APPEND, OP_COMMIT, OP_COMMIT_EOB, OP_PING = range(5)
SUFFIX = ".$FI"
GAP_MODES = ("fail", "ok")
MAX_FLOW = 65535  # the server keeps the flow in 16 bits (and clamps larger ones)
# ADR-50: 1 acts like a windowed publish_async, 2 keeps the server busy while an ack is on
# its way (the usual best), 3 suits long round trips; more only queues more in the server.
MAX_OUTSTANDING_ACKS = 3


def reply_head(inbox: str, flow: int, gap: str) -> str:
    """``<inbox>.<flow>.<gap>.``: what every reply subject of a batch starts with."""
    return f"{inbox}.{flow}.{gap}."


def reply_subject(head: str, seq: int, op: int) -> str:
    """The reply subject of batch sequence ``seq`` with operation ``op``."""
    return f"{head}{seq}.{op}{SUFFIX}"


class FlowAck(NamedTuple):
    """BatchFlowAck: messages up to ``seq`` are stored; an ack comes every ``msgs``."""

    seq: int
    msgs: int


class FlowGap(NamedTuple):
    """BatchFlowGap: messages ``last_seq`` .. ``seq - 1`` never reached the server."""

    last_seq: int
    seq: int


class FlowErr(NamedTuple):
    """BatchFlowErr: the server refused message ``seq`` with ``error``."""

    seq: int
    error: errors.APIError


Reply = Union[FlowAck, FlowGap, FlowErr, api.PubAck, errors.APIError]

_ACK_HEAD = b'{"type":"ack","seq":'  # how nats-server writes every BatchFlowAck
_ACK_MSGS = b',"msgs":'

# What to do about the server's refusals of a batch as a whole, added to its words.
_HINTS = {
    10205: "stream {stream!r} does not take fast-ingest batches: set allow_batched=True on it",
    10206: "the server could not read the batch's reply subject",
    10207: "the batch id (the last token of the batch's inbox) is over 64 characters",
    10208: "the server no longer knows this batch: it ended, or it was abandoned after 10 s "
    "without a message",
    10211: "too many fast-ingest batches are open on this stream or server; retry when some end",
}


def parse_reply(data: bytes) -> Reply:
    """What the server sent on a batch's reply subject: a flow message (FlowAck, FlowGap,
    FlowErr), the final PubAck, or the APIError of a refusal (returned, not raised).
    JetStreamError for anything else."""
    if data.startswith(_ACK_HEAD) and data.endswith(b"}"):  # the usual one, without json
        seq, sep, msgs = data[len(_ACK_HEAD) : -1].partition(_ACK_MSGS)
        if sep and seq.isdigit() and msgs.isdigit():
            return FlowAck(int(seq), int(msgs))
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):
        obj = None
    if not isinstance(obj, dict):
        raise errors.JetStreamError(f"fast-ingest batch: a reply that is not JSON: {data[:80]!r}")
    kind = obj.get("type")
    if kind == "ack":
        return FlowAck(_count(obj, "seq", data), _count(obj, "msgs", data))
    if kind == "gap":
        return FlowGap(_count(obj, "last_seq", data), _count(obj, "seq", data))
    if kind == "err":
        return FlowErr(_count(obj, "seq", data), _refusal(obj.get("error"), "", data))
    if kind is not None:
        raise errors.JetStreamError(f"fast-ingest batch: a reply of unknown type {kind!r}")
    if obj.get("error") is not None:
        stream = obj.get("stream")
        return _refusal(obj["error"], stream if isinstance(stream, str) else "", data)
    if not isinstance(obj.get("stream"), str):
        raise errors.JetStreamError(f"fast-ingest batch: a reply that is no PubAck: {data[:80]!r}")
    return api.PubAck.from_dict(obj)


def _count(obj: Any, key: str, data: bytes) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise errors.JetStreamError(f"fast-ingest batch: no {key!r} in the reply {data[:80]!r}")
    return value


def _refusal(err: Any, stream: str, data: bytes) -> errors.APIError:
    """The mapped APIError of an error object, with what to do about it where we know."""
    if not isinstance(err, dict):
        raise errors.JetStreamError(f"fast-ingest batch: a malformed error in {data[:80]!r}")
    code, err_code = err.get("code"), err.get("err_code")
    code = code if isinstance(code, int) and not isinstance(code, bool) else 0
    err_code = err_code if isinstance(err_code, int) and not isinstance(err_code, bool) else 0
    description = str(err.get("description", ""))
    hint = _HINTS.get(err_code)
    if hint:
        description = f"{description}: {hint.format(stream=stream)}"
    return errors.api_error(code, err_code, description)


def check_flow(flow: Any) -> int:
    """Return ``flow`` (the most messages one flow ack stands for) if it is an int from 1 to
    MAX_FLOW; raise InvalidArgumentError otherwise."""
    if isinstance(flow, bool) or not isinstance(flow, int) or not 1 <= flow <= MAX_FLOW:
        raise errors.InvalidArgumentError(
            f"flow (the most messages per ack) must be an int from 1 to {MAX_FLOW}, got {flow!r}"
        )
    return flow


def check_max_outstanding(value: Any) -> int:
    """Return ``value`` (the most flow acks outstanding) if it is an int from 1 to
    MAX_OUTSTANDING_ACKS; raise InvalidArgumentError otherwise."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not 1 <= value <= MAX_OUTSTANDING_ACKS
    ):
        raise errors.InvalidArgumentError(
            f"max_outstanding_acks must be 1, 2 or 3 (ADR-50: each ack stands for up to "
            f"flow messages; 2 is the usual best), got {value!r}"
        )
    return value
