"""Spark data-source options (all strings, keys lower-cased by Spark) to client arguments."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

from .. import errors

__all__ = ["connection", "float_option", "int_option", "js_options", "required"]

# Options passed to connect() as they are (strings); the rest are converted below.
_STRING_CONNECT = ("user", "password", "token", "name", "tls_hostname", "inbox_prefix")
_FLOAT_CONNECT = ("connect_timeout", "reconnect_time_wait", "ping_interval")
_INT_CONNECT = ("max_reconnect_attempts",)
# Paths of key material, readable on every executor: option name -> connect() keyword.
_FILE_CONNECT = {"creds": "user_credentials", "nkeys_seed": "nkeys_seed"}


def required(options: Mapping[str, Any], key: str) -> str:
    value = options.get(key)
    if value is None or str(value).strip() == "":
        raise errors.InvalidArgumentError(f"the jetstream data source needs the {key!r} option")
    return str(value)


def int_option(options: Mapping[str, Any], key: str, minimum: int = 0) -> Optional[int]:
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
    return servers, kwargs


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
