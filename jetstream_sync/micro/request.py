"""A request to a service endpoint, and the error a handler raises to answer with an error.

nats-py's ``nats.micro.request`` minus ``await``: ``request.respond(data)`` and
``request.respond_error(code, description)`` are plain blocking calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

from ..msg import Headers, HeadersLike, Msg

ERROR_HEADER = "Nats-Service-Error"
"""The header carrying an error response's description (ADR-32)."""

ERROR_CODE_HEADER = "Nats-Service-Error-Code"
"""The header carrying an error response's code (ADR-32)."""


class Request:
    """One request to an endpoint: what arrived, and the ways to answer it."""

    def __init__(self, msg: Msg) -> None:
        self._msg = msg
        self._error: Optional[str] = None  # "code:description" once respond_error ran

    @property
    def subject(self) -> str:
        """The subject the request arrived on."""
        return self._msg.subject

    @property
    def reply(self) -> str:
        """The subject the answer goes to ("" when the sender expects none)."""
        return self._msg.reply or ""

    @property
    def headers(self) -> Optional[Headers]:
        """The request's headers, or None when it has none (as nats-py)."""
        return self._msg.header

    @property
    def data(self) -> bytes:
        """The request's payload."""
        return self._msg.data

    @property
    def msg(self) -> Msg:
        """The message itself."""
        return self._msg

    def respond(self, data: bytes = b"", headers: Optional[HeadersLike] = None) -> None:
        """Answer the request. ValueError when it has no reply subject."""
        if not self._msg.reply:
            raise ValueError(f"no reply subject set (request on {self._msg.subject!r})")
        self._msg.respond(data, headers=headers)

    def respond_error(
        self,
        code: str,
        description: str,
        data: bytes = b"",
        headers: Optional[HeadersLike] = None,
    ) -> None:
        """Answer with an error: ``Nats-Service-Error`` is the description and
        ``Nats-Service-Error-Code`` the code, added to ``headers``."""
        ours = (ERROR_HEADER.lower(), ERROR_CODE_HEADER.lower())
        merged = Headers(  # the caller's headers, but ours win
            [(k, v) for k, v in Headers(headers).multi_items() if k.lower() not in ours]
        )
        merged.add(ERROR_HEADER, description)
        merged.add(ERROR_CODE_HEADER, str(code))
        self._error = f"{code}:{description}"
        self.respond(data, headers=merged)

    def __repr__(self) -> str:
        return f"<Request subject={self.subject!r} reply={self.reply!r} {len(self.data)} bytes>"


Handler = Callable[[Request], Any]
"""An endpoint's handler: called with each request, on the endpoint's own thread."""


@dataclass
class ServiceError(Exception):
    """Raise it from a handler to answer with this code and description."""

    code: str
    description: str

    def __repr__(self) -> str:
        return f"{self.code}:{self.description}"

    def __str__(self) -> str:
        return f"{self.code}:{self.description}"

    def to_dict(self) -> Dict[str, Any]:
        """The error as a JSON-ready dict: ``code`` and ``description``."""
        return {"code": self.code, "description": self.description}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> ServiceError:
        """The error a dict of ``code`` and ``description`` describes (missing keys are empty)."""
        return cls(code=data.get("code", ""), description=data.get("description", ""))
