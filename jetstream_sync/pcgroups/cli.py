"""``python -m jetstream_sync.pcgroups``: orbit.go's ``cg`` tool, for the same groups.

::

    python -m jetstream_sync.pcgroups [--server URL] static|elastic COMMAND ...

The commands are cg's (``ls``, ``info``, ``create``, ``delete``, ``member-info``,
``step-down``, ``consume``; elastic also ``add``, ``drop``, ``create-mapping``,
``delete-mapping``), non-interactive: what cg prompts for is given as arguments — an elastic
group's partitioning wildcards as ``--filter 'orders.*:1'``, a mapping as
``member:0,1,2``. ``consume`` joins as a member and handles messages with a simulated
processing time (``--sleep 20ms``), acking each, until Ctrl-C, ``--count`` messages, or the
group's end.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from .. import client as _client
from .. import errors
from ..jetstream.api import AckPolicy, ConsumerConfig
from ..jetstream.context import JetStream
from ..msg import Msg
from . import elastic, static
from .errors import ConsumerGroupError
from .records import MemberMapping, PartitioningFilter

__all__ = ["main"]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m)?\Z")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}


def parse_duration(text: str) -> float:
    """``20ms``, ``1.5s``, ``2m`` or plain seconds."""
    m = _DURATION.match(text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration (like 20ms, 1.5s): {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def parse_mapping(text: str) -> MemberMapping:
    """``member:0,1,2``."""
    member, colon, parts = text.partition(":")
    try:
        partitions = [int(p) for p in parts.split(",")] if colon and parts else None
    except ValueError:
        partitions = None
    if not member or partitions is None:
        raise argparse.ArgumentTypeError(
            f"a member mapping is <member>:<partition>,<partition>,..., got {text!r}"
        )
    return MemberMapping(member, partitions)


def parse_filter(text: str) -> PartitioningFilter:
    """``orders.*.*:1,2`` (the filter, then which of its ``*`` make the key) or ``orders.>``."""
    flt, colon, indexes = text.rpartition(":") if ":" in text else (text, "", "")
    try:
        # No indexes: None, orbit's zero value (stored as null), as PartitioningFilter("x.>").
        wildcards = [int(i) for i in indexes.split(",")] if colon and indexes else None
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a partitioning filter is <filter>[:<wildcard index>,...], got {text!r}"
        ) from None
    return PartitioningFilter(flt, wildcards)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m jetstream_sync.pcgroups",
        description="Partitioned consumer groups (orbit.go's cg): manage static and elastic "
        "groups, or join one as a member.",
    )
    p.add_argument(
        "--server",
        default=os.environ.get("NATS_URL", "nats://127.0.0.1:4222"),
        help="NATS URL (default: $NATS_URL or nats://127.0.0.1:4222)",
    )
    kinds = p.add_subparsers(dest="kind", required=True, metavar="static|elastic")
    for kind in ("static", "elastic"):
        k = kinds.add_parser(kind, help=f"{kind} consumer groups")
        cmds = k.add_subparsers(dest="command", required=True, metavar="COMMAND")
        ls = cmds.add_parser("ls", help="list the consumer groups defined on a stream")
        ls.add_argument("stream")

        def group_cmd(
            name: str, text: str, aliases: Sequence[str] = (), sub: Any = cmds
        ) -> argparse.ArgumentParser:
            c: argparse.ArgumentParser = sub.add_parser(name, help=text, aliases=list(aliases))
            c.add_argument("stream")
            c.add_argument("name", help="consumer group name")
            return c

        group_cmd("info", f"show a {kind} group's config and active members")
        d = group_cmd("delete", f"delete a {kind} group", ["rm"])
        d.add_argument("-f", "--force", action="store_true", help="do not ask")
        group_cmd(
            "member-info", "is a member in the membership, and active", ["minfo"]
        ).add_argument("member")
        group_cmd("step-down", "unpin a member's active instance", ["sd"]).add_argument("member")
        c = group_cmd("consume", "join as a member and handle messages", ["join"])
        c.add_argument("member")
        c.add_argument("--sleep", type=parse_duration, default=0.02, help="processing time")
        c.add_argument("--ack-wait", type=parse_duration, default=2.0)
        c.add_argument("--count", type=int, default=0, help="stop after this many messages")
        if kind == "static":
            create = cmds.add_parser("create", help="create a static group")
            how = create.add_subparsers(dest="how", required=True, metavar="balanced|mapped")
            bal = how.add_parser("balanced", help="members share the partitions evenly")
            mapped = how.add_parser("mapped", help="partitions assigned to members")
            for sub in (bal, mapped):
                sub.add_argument("stream")
                sub.add_argument("name")
                sub.add_argument("max_members", type=int, metavar="max-members")
                sub.add_argument("--filter", action="append", default=[], help="filter(s)")
            bal.add_argument("members", nargs="+")
            mapped.add_argument(
                "mappings", nargs="+", type=parse_mapping, help="<member>:<p>,<p>,..."
            )
        else:
            create = group_cmd("create", "create an elastic group (no members yet)")
            create.add_argument("max_members", type=int, metavar="max-members")
            create.add_argument(
                "--filter",
                action="append",
                default=[],
                type=parse_filter,
                help="<filter>[:<wildcard index>,...], e.g. 'orders.*:1' (default: every "
                "subject, all of it the key)",
            )
            create.add_argument("--max-buffered-msgs", type=int, default=0)
            create.add_argument("--max-buffered-bytes", type=int, default=0)
            group_cmd("add", "add members").add_argument("members", nargs="+")
            group_cmd("drop", "drop members").add_argument("members", nargs="+")
            group_cmd("create-mapping", "set member mappings").add_argument(
                "mappings", nargs="+", type=parse_mapping, help="<member>:<p>,<p>,..."
            )
            group_cmd("delete-mapping", "remove the member mappings")
    return p


def _confirm(force: bool) -> bool:
    if force:
        return True
    answer = input("this makes every member of the group stop consuming; are you sure? (y/n): ")
    return answer.strip() == "y"


def _info(js: JetStream, kind: str, stream: str, name: str) -> None:
    if kind == "static":
        s = static.get_static_config(js, stream, name)
        print(f"static consumer group {stream}.{name}: max members {s.max_members}")
        print(f"filters: {s.filters or ['>']}")
        active = static.static_active_members(js, stream, name)
        members, mappings = s.members, s.member_mappings
    else:
        e = elastic.get_elastic_config(js, stream, name)
        print(f"elastic consumer group {stream}.{name}: max members {e.max_members}")
        for pf in e.partitioning_filters or [PartitioningFilter(">", [])]:
            print(f"filter {pf.filter}, partitioning wildcards {pf.partitioning_wildcards or []}")
        active = elastic.elastic_active_members(js, stream, name)
        members, mappings = e.members, e.member_mappings
    if members:
        print(f"members: {members}")
    for m in mappings:
        print(f"mapping: {m.member} -> {m.partitions or []}")
    print(f"active members: {active}")


def _consume(js: JetStream, args: argparse.Namespace) -> int:
    done = threading.Event()
    handled = 0

    def handle(msg: Msg) -> None:
        nonlocal handled
        md = msg.metadata
        pin = msg.headers.get("Nats-Pin-Id") if msg.headers else None
        print(
            f"[{args.member}] subject={msg.subject}, seq={md.sequence.stream}, pinnedID={pin}. "
            f"Processing for {args.sleep} s ... ",
            end="",
            flush=True,
        )
        time.sleep(args.sleep)  # the simulated processing time
        try:
            msg.ack_sync()
            print("acked", flush=True)
        except errors.NATSError as exc:
            print(f"not acked ({exc}): it will be or was delivered again", flush=True)
        handled += 1
        if args.count and handled >= args.count:
            done.set()

    config = ConsumerConfig(
        ack_wait=args.ack_wait, max_ack_pending=1, ack_policy=AckPolicy.EXPLICIT
    )
    join = static.static_consume if args.kind == "static" else elastic.elastic_consume
    cc = join(js, args.stream, args.name, args.member, handle, config)
    print(
        f"joined {args.kind} consumer group {args.stream}.{args.name} as {args.member}", flush=True
    )

    def watch_end() -> None:
        cc.wait()
        done.set()

    ender = threading.Thread(target=watch_end, daemon=True)
    ender.start()
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    cc.stop()
    cc.wait(30)
    print(f"ended: {cc.error or 'ok'}", flush=True)
    return 1 if cc.error else 0


def _run(js: JetStream, args: argparse.Namespace) -> int:
    kind, cmd = args.kind, args.command
    if cmd == "ls":
        names = (static.list_static if kind == "static" else elastic.list_elastic)(js, args.stream)
        for n in names:
            print(n)
        return 0
    if cmd == "info":
        _info(js, kind, args.stream, args.name)
        return 0
    if cmd in ("delete", "rm"):
        if not _confirm(args.force):
            print("canceled")
            return 1
        (static.delete_static if kind == "static" else elastic.delete_elastic)(
            js, args.stream, args.name
        )
        return 0
    if cmd in ("member-info", "minfo"):
        if kind == "static":
            config = static.get_static_config(js, args.stream, args.name)
            member = config.is_in_membership(args.member)
            active = args.member in static.static_active_members(js, args.stream, args.name)
        else:
            member, active = elastic.elastic_is_in_membership_and_active(
                js, args.stream, args.name, args.member
            )
        print(
            f"member {args.member}: "
            + ("in the membership" if member else "not in the membership")
            + (", active" if active else ", NO active instance")
        )
        return 0
    if cmd in ("step-down", "sd"):
        step = (
            static.static_member_step_down if kind == "static" else elastic.elastic_member_step_down
        )
        step(js, args.stream, args.name, args.member)
        return 0
    if cmd in ("consume", "join"):
        return _consume(js, args)
    if cmd == "create" and kind == "static":
        static.create_static(
            js,
            args.stream,
            args.name,
            args.max_members,
            args.filter,
            getattr(args, "members", None),
            getattr(args, "mappings", None),
        )
        return 0
    actions: Dict[str, Callable[[], object]] = {
        "create": lambda: elastic.create_elastic(
            js,
            args.stream,
            args.name,
            args.max_members,
            args.filter or None,
            args.max_buffered_msgs,
            args.max_buffered_bytes,
        ),
        "add": lambda: print(
            f"members: {elastic.add_members(js, args.stream, args.name, args.members)}"
        ),
        "drop": lambda: print(
            f"members: {elastic.delete_members(js, args.stream, args.name, args.members)}"
        ),
        "create-mapping": lambda: elastic.set_member_mappings(
            js, args.stream, args.name, args.mappings
        ),
        "delete-mapping": lambda: elastic.delete_member_mappings(js, args.stream, args.name),
    }
    actions[cmd]()
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command line ``argv`` (None: ``sys.argv[1:]``) against the server ``--server``
    names; returns the exit status, 1 after printing a NATS or consumer group error."""
    args = _parser().parse_args(argv)
    try:
        with _client.connect(args.server, name="pcgroups-cli") as nc:
            return _run(nc.jetstream(), args)
    except (ConsumerGroupError, errors.NATSError) as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
