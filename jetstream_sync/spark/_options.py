"""Spark data-source options (all strings, keys lower-cased by Spark) to client arguments."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

from .. import errors
from .._protocol import check_subscribe_subject

__all__ = [
    "bool_option",
    "checked",
    "connection",
    "duration_option",
    "filters_option",
    "float_option",
    "int_option",
    "js_options",
    "required",
]

# Options passed to connect() as they are (strings); the rest are converted below.
_STRING_CONNECT = ("user", "password", "token", "name", "tls_hostname", "inbox_prefix")
_FLOAT_CONNECT = ("connect_timeout", "reconnect_time_wait", "ping_interval")
_INT_CONNECT = ("max_reconnect_attempts",)
# Paths of key material, readable on every executor: option name -> connect() keyword.
_FILE_CONNECT = {"creds": "user_credentials", "nkeys_seed": "nkeys_seed"}
# TLS from files readable on every executor (the SSLContext is made there, by _clients):
# the CA to verify the server with, and a client certificate and key for mutual TLS.
_TLS_FILES = ("tls_ca_file", "tls_cert_file", "tls_key_file")
_BOOL_CONNECT = ("tls_handshake_first",)


_JS = ("domain", "api_prefix", "timeout")
_CONNECTION = (
    "servers",
    *_STRING_CONNECT,
    *_FLOAT_CONNECT,
    *_INT_CONNECT,
    *_FILE_CONNECT,
    *_TLS_FILES,
    *_BOOL_CONNECT,
    *_JS,
)
# What each use of the data source reads, besides the connection.
_READ = (
    "stream",
    "filter_subject",
    "filter_subjects",
    "partitions",
    "direct",
    "start_seq",
    "start_time",
    "read_timeout",
    "include_headers",
)
_WRITE = ("stream", "subject", "write_id", "ack_timeout")
_KNOWN = {
    "read": (*_READ, "end_seq", "end_time"),
    "stream read": (
        *_READ,
        "starting",
        "max_rows_per_trigger",
        "min_rows_per_trigger",
        "max_trigger_delay",
        "fail_on_data_loss",
    ),
    "write": _WRITE,
    "stream write": _WRITE,
}
# Spark's own options, which it may pass along to a data source.
_SPARKS = frozenset({"path", "checkpointlocation"})
# Kafka source names (as Spark hands them: lower-cased) with the same meaning here, each with
# the option of ours it stands for (a use that lacks that option lacks the alias too).
_KAFKA = {
    "startingoffsets": "start_seq",
    "endingoffsets": "end_seq",
    "maxoffsetspertrigger": "max_rows_per_trigger",
    "failondataloss": "fail_on_data_loss",
    "includeheaders": "include_headers",
    "minoffsetspertrigger": "min_rows_per_trigger",
    "maxtriggerdelay": "max_trigger_delay",
}


def checked(options: Mapping[str, Any], use: str) -> Dict[str, Any]:
    """The options for ``use`` (read, stream read, write, stream write) with Kafka's names
    turned into ours; an unknown option is an error naming the valid ones, never ignored.

    ``startingOffsets``: ``earliest`` / ``latest`` (a stream read), or a stream sequence to
    start at (a number, or ``{"seq": n}`` as this source's offsets are written);
    ``endingOffsets`` (a batch read): ``latest`` (no end) or a last sequence;
    ``maxOffsetsPerTrigger``: sequences per micro-batch.
    """
    known = set(_CONNECTION) | set(_KNOWN[use])
    out: Dict[str, Any] = {}
    for key, value in options.items():
        name = str(key).lower()
        if name in _KAFKA and _KAFKA[name] in known:
            translated = _from_kafka(name, str(value).strip(), known, use)
            if translated is None:
                continue  # our default already
            name, value = translated
        elif name not in known and name not in _SPARKS:
            valid = sorted(known | {k for k, v in _KAFKA.items() if v in known})
            raise errors.InvalidArgumentError(
                f"unknown option {key!r} for a jetstream {use}; valid options: " + ", ".join(valid)
            )
        if name in out:
            raise errors.InvalidArgumentError(f"option {name!r} is given twice (or by an alias)")
        out[name] = value
    return out


def _from_kafka(name: str, text: str, known: Set[str], use: str) -> Optional[Tuple[str, str]]:
    """Our option and value for one of Kafka's, or None where ours is the default."""
    word = text.lower()
    if name == "startingoffsets":
        if word in ("earliest", "latest"):
            if "starting" in known:
                return "starting", word
            if word == "earliest":
                return None  # a batch read starts at the first message anyway
            raise errors.InvalidArgumentError(
                f"option 'startingOffsets' cannot be latest for a jetstream {use}"
            )
        return "start_seq", _seq_of(name, text)
    if name == "endingoffsets":
        return None if word == "latest" else ("end_seq", _seq_of(name, text))
    return _KAFKA[name], text


def _seq_of(name: str, text: str) -> str:
    """A stream sequence from a number or ``{"seq": n}`` (the offsets this source writes)."""
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except ValueError:
            obj = None
        if not isinstance(obj, dict) or not isinstance(obj.get("seq"), int):
            raise errors.InvalidArgumentError(
                f'option {name!r} must be earliest, latest, a sequence or {{"seq": n}}, '
                f"got {text!r}"
            )
        return str(obj["seq"])
    return text


def filters_option(options: Mapping[str, Any]) -> Optional[List[str]]:
    """``filter_subject`` and ``filter_subjects`` (comma-separated) together, each checked as
    a subscribe subject (``*`` and ``>`` allowed); None for the whole stream."""
    found: List[str] = []
    if options.get("filter_subject"):
        found.append(str(options["filter_subject"]).strip())
    if options.get("filter_subjects"):
        found += [f.strip() for f in str(options["filter_subjects"]).split(",") if f.strip()]
    for f in found:
        check_subscribe_subject(f, "filter subject")
    # One that another covers (rd.a under rd.*) adds nothing; the server refuses a consumer
    # whose filters overlap, so any other overlap (a.*.c, a.b.*) is the caller's to resolve.
    kept: List[str] = []
    for f in dict.fromkeys(found):
        if any(_covers(g, f) for g in found if g != f):
            continue
        for g in kept:
            if _overlap(f, g):
                raise errors.InvalidArgumentError(
                    f"filter subjects {g!r} and {f!r} overlap: give filters no subject "
                    "matches twice (as a consumer's filters must be)"
                )
        kept.append(f)
    return kept or None


def _covers(wide: str, narrow: str) -> bool:
    """Whether every subject ``narrow`` matches is matched by ``wide`` too."""
    tn, tw = narrow.split("."), wide.split(".")
    for i, t in enumerate(tw):
        if t == ">":
            return len(tn) > i
        if i >= len(tn) or tn[i] == ">" or (t != "*" and tn[i] != t):
            return False
    return len(tn) == len(tw)


def _overlap(a: str, b: str) -> bool:
    """Whether some subject matches both patterns."""
    ta, tb = a.split("."), b.split(".")
    for i in range(max(len(ta), len(tb))):
        x = ta[i] if i < len(ta) else None
        y = tb[i] if i < len(tb) else None
        if x == ">" or y == ">":
            return x is not None and y is not None
        if x is None or y is None:
            return False
        if x != y and x != "*" and y != "*":
            return False
    return True


def required(options: Mapping[str, Any], key: str) -> str:
    """The option ``key`` as a str; InvalidArgumentError when it is missing or blank."""
    value = options.get(key)
    if value is None or str(value).strip() == "":
        raise errors.InvalidArgumentError(f"the jetstream data source needs the {key!r} option")
    return str(value)


def int_option(options: Mapping[str, Any], key: str, minimum: int = 0) -> Optional[int]:
    """The option ``key`` as an int, None when missing or blank; InvalidArgumentError when it is
    not an integer or is below ``minimum``."""
    value = options.get(key)
    if value is None or str(value).strip() == "":
        return None
    try:
        n = int(str(value).strip())
    except ValueError:
        raise errors.InvalidArgumentError(
            f"option {key!r} must be an integer, got {value!r}"
        ) from None
    if n < minimum:
        raise errors.InvalidArgumentError(f"option {key!r} must be >= {minimum}, got {n}")
    return n


def float_option(options: Mapping[str, Any], key: str) -> Optional[float]:
    """The option ``key`` as a float, None when missing or blank; InvalidArgumentError when it is
    not a number."""
    value = options.get(key)
    if value is None or str(value).strip() == "":
        return None
    try:
        return float(str(value).strip())
    except ValueError:
        raise errors.InvalidArgumentError(
            f"option {key!r} must be a number, got {value!r}"
        ) from None


def connection(options: Mapping[str, Any]) -> Tuple[str, Dict[str, Any]]:
    """``(servers, connect keywords)`` from the options: servers, user, password, token,
    name, connect_timeout, ... Credentials pass through; they are never logged."""
    servers = required(options, "servers")
    kwargs: Dict[str, Any] = {}
    for key, keyword in _FILE_CONNECT.items():
        if options.get(key):
            kwargs[keyword] = str(options[key])
    for key in _STRING_CONNECT:
        if options.get(key):
            kwargs[key] = str(options[key])
    for key in _FLOAT_CONNECT:
        f = float_option(options, key)
        if f is not None:
            kwargs[key] = f
    for key in _INT_CONNECT:
        n = int_option(options, key, minimum=-1)
        if n is not None:
            kwargs[key] = n
    for key in _TLS_FILES:
        if options.get(key):
            kwargs[key] = str(options[key])
    if ("tls_cert_file" in kwargs) != ("tls_key_file" in kwargs):
        raise errors.InvalidArgumentError(
            "options 'tls_cert_file' and 'tls_key_file' go together (mutual TLS)"
        )
    for key in _BOOL_CONNECT:
        flag = bool_option(options, key)
        if flag is not None:
            kwargs[key] = flag
    return servers, kwargs


_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def duration_option(options: Mapping[str, Any], key: str) -> Optional[float]:
    """Seconds from ``30``, ``30s``, ``500ms``, ``15m`` or ``1h`` (Kafka's maxTriggerDelay)."""
    value = options.get(key)
    if value is None or str(value).strip() == "":
        return None
    text = str(value).strip().lower()
    number, unit = text, "s"
    for suffix in sorted(_UNITS, key=len, reverse=True):
        if text.endswith(suffix):
            number, unit = text[: -len(suffix)].strip(), suffix
            break
    try:
        seconds = float(number) * _UNITS[unit]
    except ValueError:
        seconds = -1.0
    if seconds < 0:
        raise errors.InvalidArgumentError(
            f"option {key!r} must be a duration such as 30s, 500ms, 15m or 1h, got {value!r}"
        )
    return seconds


def bool_option(options: Mapping[str, Any], key: str) -> Optional[bool]:
    """The option ``key`` as a bool (``true`` or ``false``, any case), None when missing or
    blank; InvalidArgumentError otherwise."""
    value = options.get(key)
    if value is None or str(value).strip() == "":
        return None
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise errors.InvalidArgumentError(f"option {key!r} must be true or false, got {value!r}")
    return text == "true"


def js_options(options: Mapping[str, Any]) -> Dict[str, Any]:
    """JetStream context keywords: domain, api_prefix, timeout (API timeout, seconds)."""
    out: Dict[str, Any] = {}
    if options.get("domain"):
        out["domain"] = str(options["domain"])
    if options.get("api_prefix"):
        out["prefix"] = str(options["api_prefix"])
    t = float_option(options, "timeout")
    if t is not None:
        out["timeout"] = t
    return out
