"""Priority groups of pull consumers (ADR-42, seed 004): the config rules, the pull options,
and the pin of the pinned_client policy.

A consumer with a ``priority_policy`` has one group in ``priority_groups``; every pull names
it (``group``) and, by policy, adds:

* ``overflow``: ``min_pending`` / ``min_ack_pending`` — the pull is served only while the
  consumer's num_pending or num_ack_pending is at least that (either is enough);
* ``prioritized``: ``priority`` 0-9 — waiting pulls with a lower number are served first;
* ``pinned_client``: nothing to give. The server pins one client: the messages it gets
  carry ``Nats-Pin-Id``, which the client then sends as ``id`` on every later pull of the
  group. A pull with an id that is no longer the pin is answered 423: the client forgets the
  id and pulls on without it, as a standby that the server pins when the pinned client goes
  quiet for ``priority_timeout`` or an admin unpins it (:meth:`JetStream.unpin_consumer`).

Everything here is checked before anything is sent: :func:`check_priority_config` for
consumer configs, :func:`pull_priority` for the options of each pull.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

from .. import errors
from .._seam import raw_headers
from ..msg import Msg
from . import api

__all__ = [
    "PIN_HEADER",
    "PinLost",
    "PinState",
    "PullPriority",
    "check_group_name",
    "check_priority_config",
    "pull_priority",
]

PIN_HEADER = "Nats-Pin-Id"
GROUP_MAX_LEN = 16
_GROUP_RE = re.compile(r"[A-Za-z0-9_\-/=]+\Z")  # ADR-6 limited-term
_POLICIES = (
    api.PriorityPolicy.OVERFLOW,
    api.PriorityPolicy.PINNED_CLIENT,
    api.PriorityPolicy.PRIORITIZED,
)


def _policy_text(policy: Any) -> str:
    return str(getattr(policy, "value", policy))


def check_group_name(group: Any) -> str:
    """A priority group name: 1-16 of A-Z a-z 0-9 - _ / = (ADR-6 limited-term)."""
    if not isinstance(group, str) or not _GROUP_RE.match(group) or len(group) > GROUP_MAX_LEN:
        raise errors.InvalidArgumentError(
            f"priority group must be 1-{GROUP_MAX_LEN} characters of A-Z, a-z, 0-9, "
            f"'-', '_', '/', '=', got {group!r}"
        )
    return group


def check_priority_config(cfg: api.ConsumerConfig) -> None:
    """The ADR-42 rules for a consumer config, checked before it is sent (point 1)."""
    policy = cfg.priority_policy
    groups = cfg.priority_groups
    if policy is None or policy == api.PriorityPolicy.NONE:
        if groups:
            raise errors.InvalidArgumentError(
                "priority_groups needs a priority_policy (overflow, pinned_client or prioritized)"
            )
        if cfg.priority_timeout is not None:
            raise errors.InvalidArgumentError(
                "priority_timeout is for the pinned_client priority policy"
            )
        return
    if policy not in _POLICIES:
        raise errors.InvalidArgumentError(
            "priority_policy must be one of overflow, pinned_client, prioritized, got "
            f"{_policy_text(policy)!r}"
        )
    if not isinstance(groups, list) or len(groups) != 1:
        raise errors.InvalidArgumentError(
            f"priority policy {_policy_text(policy)} needs exactly one group in "
            f"priority_groups, got {groups!r}"
        )
    check_group_name(groups[0])
    if cfg.deliver_subject:
        raise errors.InvalidArgumentError(
            "priority groups are for pull consumers: a consumer with a deliver_subject "
            f"({cfg.deliver_subject!r}) cannot have a priority policy"
        )
    if cfg.ack_policy is not None and cfg.ack_policy != api.AckPolicy.EXPLICIT:
        raise errors.InvalidArgumentError(
            f"priority policy {_policy_text(policy)} needs ack_policy explicit, got "
            f"{_policy_text(cfg.ack_policy)}"
        )
    if cfg.priority_timeout is not None:
        if policy != api.PriorityPolicy.PINNED_CLIENT:
            raise errors.InvalidArgumentError(
                "priority_timeout is for the pinned_client priority policy, not "
                f"{_policy_text(policy)}"
            )
        if cfg.priority_timeout <= 0:
            raise errors.InvalidArgumentError(
                f"priority_timeout must be > 0 seconds, got {cfg.priority_timeout!r}"
            )


@dataclass(frozen=True)
class PullPriority:
    """The priority-group fields of a pull request (checked by :func:`pull_priority`)."""

    group: str
    pinned: bool = False  # the pinned_client policy: pulls carry the pin id once known
    min_pending: Optional[int] = None
    min_ack_pending: Optional[int] = None
    priority: Optional[int] = None

    def body_fields(self, pin_id: Optional[str]) -> Dict[str, Any]:
        """The pull request's priority-group fields, with the pin id when there is one."""
        fields: Dict[str, Any] = {"group": self.group}
        if self.min_pending is not None:
            fields["min_pending"] = self.min_pending
        if self.min_ack_pending is not None:
            fields["min_ack_pending"] = self.min_ack_pending
        if self.priority is not None:
            fields["priority"] = self.priority
        if pin_id:
            fields["id"] = pin_id
        return fields


def _check_threshold(value: Any, what: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise errors.InvalidArgumentError(f"{what} must be an int >= 1, got {value!r}")
    return value


def pull_priority(
    config: api.ConsumerConfig,
    where: str,
    group: Optional[str],
    min_pending: Optional[int] = None,
    min_ack_pending: Optional[int] = None,
    priority: Optional[int] = None,
) -> Optional[PullPriority]:
    """Check a pull's priority options against the consumer's config (point 2): a group is
    required when it has priority groups and refused when it has none; the thresholds go
    with overflow, ``priority`` with prioritized. None for a consumer without groups."""
    groups = config.priority_groups or []
    if (
        not groups
        and group is None
        and min_pending is None
        and min_ack_pending is None
        and priority is None
    ):
        return None  # asked on every pull: the common case first, with nothing to check
    policy = config.priority_policy
    lo = _check_threshold(min_pending, "min_pending")
    la = _check_threshold(min_ack_pending, "min_ack_pending")
    if priority is not None and (
        isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 9
    ):
        raise errors.InvalidArgumentError(f"priority must be an int 0-9, got {priority!r}")
    if policy is None or policy == api.PriorityPolicy.NONE or not groups:
        if group is not None or lo is not None or la is not None or priority is not None:
            raise errors.InvalidArgumentError(
                f"{where} has no priority groups: group, min_pending, min_ack_pending and "
                "priority do not apply"
            )
        return None
    if group is None:
        raise errors.InvalidArgumentError(
            f"{where} has priority groups {groups}: give group= on every pull"
        )
    check_group_name(group)
    if group not in groups:
        raise errors.InvalidArgumentError(f"{where} has priority groups {groups}, not {group!r}")
    if (lo is not None or la is not None) and policy != api.PriorityPolicy.OVERFLOW:
        raise errors.InvalidArgumentError(
            f"min_pending / min_ack_pending go with the overflow policy; {where} uses "
            f"{_policy_text(policy)}"
        )
    if priority is not None and policy != api.PriorityPolicy.PRIORITIZED:
        raise errors.InvalidArgumentError(
            f"priority goes with the prioritized policy; {where} uses {_policy_text(policy)}"
        )
    return PullPriority(
        group,
        pinned=policy == api.PriorityPolicy.PINNED_CLIENT,
        min_pending=lo,
        min_ack_pending=la,
        priority=priority,
    )


class PinLost(Exception):
    """Internal: a 423 answered a pull that carried a pin this client no longer holds."""


PinnedCallback = Callable[[str], None]
UnpinnedCallback = Callable[[], None]


class PinState:
    """What a consumer object knows of its pins: group -> pin id (pinned_client policy).

    Shared by every pull path of one consumer object, so that a plain loop of ``fetch``
    calls keeps the pin as a ``consume`` does. Callbacks run on the thread that saw the
    message or the 423 (the caller of fetch / next, or the consuming thread)."""

    def __init__(self) -> None:
        self._pins: Dict[str, str] = {}
        self._lock = threading.Lock()

    def get(self, group: str) -> Optional[str]:
        """The pin id held for ``group``, or None."""
        return self._pins.get(group)

    def current(self, config: api.ConsumerConfig, group: Optional[str]) -> Optional[str]:
        """The pin held in ``group`` (default: the consumer's only group), or None."""
        if group is None:
            groups = config.priority_groups or []
            group = groups[0] if len(groups) == 1 else ""
        return self._pins.get(group)

    def for_pull(self, prio: Optional[PullPriority]) -> Optional[str]:
        """The pin id a pull with these options carries (pinned_client only)."""
        return self._pins.get(prio.group) if prio is not None and prio.pinned else None

    def observe(self, group: str, msg: Msg, on_pinned: Optional[PinnedCallback] = None) -> None:
        """A message pulled for ``group``: its Nats-Pin-Id makes (or keeps) this client the
        pinned one."""
        if raw_headers(msg) is None:
            return
        pin = msg.all_headers.get(PIN_HEADER)
        if not pin:
            return
        with self._lock:
            if self._pins.get(group) == pin:
                return
            self._pins[group] = pin
        if on_pinned is not None:
            on_pinned(pin)

    def lost(
        self, group: str, sent: Optional[str], on_unpinned: Optional[UnpinnedCallback] = None
    ) -> bool:
        """A 423 for a pull sent with pin ``sent``: forget it (if no newer pin came since).
        True when this client was pinned until now."""
        with self._lock:
            if sent is None or self._pins.get(group) != sent:
                return False
            del self._pins[group]
        if on_unpinned is not None:
            on_unpinned()
        return True
