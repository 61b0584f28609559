"""Services (ADR-32, nats-py's ``nats.micro``) minus ``await``.

::

    import jetstream_sync as nats
    from jetstream_sync import micro

    nc = nats.connect(url)
    svc = micro.add_service(nc, name="adder", version="1.0.0")
    svc.add_endpoint(name="add", handler=lambda req: req.respond(b"42"))
    ...
    svc.stop()

Built on the client's public API only (``subscribe`` with a queue group, ``msg.respond``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from .request import ERROR_CODE_HEADER, ERROR_HEADER, Handler, Request, ServiceError
from .service import (
    DEFAULT_PREFIX,
    DEFAULT_QUEUE_GROUP,
    Endpoint,
    EndpointConfig,
    EndpointInfo,
    EndpointStats,
    Group,
    GroupConfig,
    Service,
    ServiceConfig,
    ServiceInfo,
    ServicePing,
    ServiceStats,
    ServiceVerb,
    StatsHandler,
    control_subject,
)

if TYPE_CHECKING:
    from ..client import Client


def add_service(nc: Client, config: Optional[ServiceConfig] = None, **kwargs: Any) -> Service:
    """Start a service on ``nc``: a ServiceConfig, or its fields as keywords (keywords
    given with a config replace its fields). Returns the running Service."""
    if config is None:
        config = ServiceConfig(**kwargs)
    elif not isinstance(config, ServiceConfig):
        raise TypeError(f"config must be a ServiceConfig, not {type(config).__name__}")
    elif kwargs:
        from dataclasses import replace

        config = replace(config, **kwargs)
    service = Service(nc, config)
    service.start()
    return service


__all__ = [
    "DEFAULT_PREFIX",
    "DEFAULT_QUEUE_GROUP",
    "ERROR_CODE_HEADER",
    "ERROR_HEADER",
    "Endpoint",
    "EndpointConfig",
    "EndpointInfo",
    "EndpointStats",
    "Group",
    "GroupConfig",
    "Handler",
    "Request",
    "Service",
    "ServiceConfig",
    "ServiceError",
    "ServiceInfo",
    "ServicePing",
    "ServiceStats",
    "ServiceVerb",
    "StatsHandler",
    "add_service",
    "control_subject",
]
