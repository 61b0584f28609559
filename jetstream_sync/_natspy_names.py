"""nats-py's private names that its own tests, and code ported from them, read: kept
apart from Client's body, which reads as the public API."""

from __future__ import annotations

import urllib.parse
from typing import TYPE_CHECKING, Any, Dict, cast

from ._link import CLOSED, CONNECTED, RECONNECTING
from ._servers import parse_url

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client


class NatsPyPrivateNames:
    """Mixed into Client."""

    @property
    def _status(self) -> int:
        """nats-py's status number (Client.CONNECTED ...)."""
        nc = cast("Client", self)
        link = nc._link
        if link.state is CLOSED or link.closing:
            return nc.CLOSED
        if nc._draining:
            return nc._draining
        if link.state is CONNECTED:
            return nc.CONNECTED
        if link.state is RECONNECTING:
            return nc.RECONNECTING
        return nc.CONNECTING if nc._network.connecting else nc.DISCONNECTED

    @property
    def _server_info(self) -> Dict[str, Any]:
        """nats-py's name for server_info."""
        return cast("Client", self).server_info

    @staticmethod
    def _parse_server_uri(connect_url: str) -> urllib.parse.ParseResult:
        """A server URL (scheme and port defaulted) as a ParseResult, to build a Server for
        reconnect_to_server_handler. Credentials are left out, as in the pool."""
        return urllib.parse.urlparse(parse_url(connect_url).url)
