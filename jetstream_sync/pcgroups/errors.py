"""The errors of partitioned consumer groups: a branch of JetStreamError.

::

    JetStreamError
    └── ConsumerGroupError                      anything of a partitioned consumer group
        ├── ConsumerGroupNotFoundError          no config record (or no bucket) for the group
        ├── ConsumerGroupConfigError            a config that orbit.go's rules refuse
        │                                       (also InvalidArgumentError)
        ├── ConsumerGroupExistsError            create_* found a different config for the group
        ├── NotAMemberError                     static_consume by a name not in the membership
        └── ConsumerGroupChangedError           the config changed under a running member in a
                                                way it cannot follow (ends its consume context)
"""

from __future__ import annotations

from .. import errors

__all__ = [
    "ConsumerGroupChangedError",
    "ConsumerGroupConfigError",
    "ConsumerGroupError",
    "ConsumerGroupExistsError",
    "ConsumerGroupNotFoundError",
    "NotAMemberError",
]


class ConsumerGroupError(errors.JetStreamError):
    """Anything of a partitioned consumer group."""


class ConsumerGroupNotFoundError(ConsumerGroupError):
    """The group has no config record (or its bucket does not exist): create it first."""


class ConsumerGroupConfigError(ConsumerGroupError, errors.InvalidArgumentError):
    """A group config that breaks orbit.go's rules (also what a bad record in the bucket is)."""


class ConsumerGroupExistsError(ConsumerGroupError):
    """create_static / create_elastic found the group with a different config."""


class NotAMemberError(ConsumerGroupError):
    """static_consume with a member name that is not in the group's membership."""


class ConsumerGroupChangedError(ConsumerGroupError):
    """The group's config changed in a way the running member cannot follow: a static
    group's config, or an elastic group's max_members / filters / buffer limits."""
