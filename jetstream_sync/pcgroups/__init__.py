"""Partitioned consumer groups: strict order per key, consumption scaled over many processes.

orbit.go's ``pcgroups`` in Python, compatible with it (the same KV records, stream, consumer
and priority group names), so Go and Python members can share a group. A group spreads the
messages of a stream over ``max_members`` partitions by a key taken from their subjects; each
partition belongs to one member at a time, and each member runs as one or more instances (in
any process: one is pinned and gets the messages, the others stand by for failover).

* **static** groups: the stream's subjects already start with the partition number; the
  membership is fixed when the group is made. :func:`create_static`, :func:`static_consume`.
* **elastic** groups: any stream; the group's own work-queue stream sources it and inserts the
  partition number; members are added and dropped at run time. :func:`create_elastic`,
  :func:`add_members`, :func:`delete_members`, :func:`elastic_consume`.
* short-lived members (Spark tasks, cron jobs, batch scripts): :func:`consume_backlog` joins
  an elastic group, handles its member's backlog, and leaves nothing behind.

With ``max_ack_pending=1`` in the member's consumer config, each key's messages are handled
one at a time, in order, across the whole group.
"""

from __future__ import annotations

from .backlog import BacklogResult, consume_backlog
from .elastic import (
    add_members,
    create_elastic,
    delete_elastic,
    delete_member_mappings,
    delete_members,
    elastic_active_members,
    elastic_consume,
    elastic_is_in_membership_and_active,
    elastic_member_step_down,
    get_elastic_config,
    list_elastic,
    set_member_mappings,
)
from .errors import (
    ConsumerGroupChangedError,
    ConsumerGroupConfigError,
    ConsumerGroupError,
    ConsumerGroupExistsError,
    ConsumerGroupNotFoundError,
    NotAMemberError,
)
from .member import ConsumerGroupConsumeContext
from .partitions import (
    ELASTIC_BUCKET,
    PRIORITY_GROUP,
    STATIC_BUCKET,
    elastic_partition_filters,
    generate_partition_filters,
    partitioning_transform_dest,
    static_partition_filters,
)
from .records import (
    ElasticConsumerGroupConfig,
    MemberMapping,
    PartitioningFilter,
    StaticConsumerGroupConfig,
)
from .static import (
    create_static,
    delete_static,
    get_static_config,
    list_static,
    static_active_members,
    static_consume,
    static_member_step_down,
)

__all__ = [
    "ELASTIC_BUCKET",
    "PRIORITY_GROUP",
    "STATIC_BUCKET",
    "BacklogResult",
    "ConsumerGroupChangedError",
    "ConsumerGroupConfigError",
    "ConsumerGroupConsumeContext",
    "ConsumerGroupError",
    "ConsumerGroupExistsError",
    "ConsumerGroupNotFoundError",
    "ElasticConsumerGroupConfig",
    "MemberMapping",
    "NotAMemberError",
    "PartitioningFilter",
    "StaticConsumerGroupConfig",
    "add_members",
    "consume_backlog",
    "create_elastic",
    "create_static",
    "delete_elastic",
    "delete_member_mappings",
    "delete_members",
    "delete_static",
    "elastic_active_members",
    "elastic_consume",
    "elastic_is_in_membership_and_active",
    "elastic_member_step_down",
    "elastic_partition_filters",
    "generate_partition_filters",
    "get_elastic_config",
    "get_static_config",
    "list_elastic",
    "list_static",
    "partitioning_transform_dest",
    "set_member_mappings",
    "static_active_members",
    "static_consume",
    "static_member_step_down",
    "static_partition_filters",
]
