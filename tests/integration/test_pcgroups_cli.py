"""``python -m jetstream_sync.pcgroups`` (orbit.go's cg commands) against a real server: the
elastic commands end to end with a consuming member in its own process, static create / info /
delete, the help, and a refusal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from jetstream_sync import pcgroups
from jetstream_sync.jetstream.api import SubjectTransform
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.pcgroups.cli import main
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import stream_name

ROOT = str(Path(__file__).resolve().parents[2])
ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
}


def cg(server: NATSServer, capsys: pytest.CaptureFixture[str], *args: str) -> List[str]:
    assert main(["--server", server.url, *args]) == 0, capsys.readouterr().err
    return capsys.readouterr().out.splitlines()


def test_elastic_commands(
    js: JetStream, nats_server: NATSServer, capsys: pytest.CaptureFixture[str]
) -> None:
    s = stream_name("PCGC")
    js.add_stream(name=s, subjects=["cli.*"])
    cg(nats_server, capsys, "elastic", "create", s, "cg", "4", "--filter", "cli.*:1")
    assert pcgroups.get_elastic_config(js, s, "cg").partitioning_filters == [
        pcgroups.PartitioningFilter("cli.*", [1])
    ]
    assert cg(nats_server, capsys, "elastic", "ls", s) == ["cg"]
    assert cg(nats_server, capsys, "elastic", "add", s, "cg", "m1", "m2") == [
        "members: ['m1', 'm2']"
    ]
    assert cg(nats_server, capsys, "elastic", "drop", s, "cg", "m2") == ["members: ['m1']"]
    for k in range(3):
        js.publish(f"cli.k{k}", b"x")
    command = f"-m jetstream_sync.pcgroups --server {nats_server.url} elastic consume {s} cg m1"
    member = subprocess.run(
        [sys.executable, *command.split(), "--sleep", "1ms", "--count", "3"],
        capture_output=True,
        text=True,
        timeout=60,
        env=ENV,
    )
    assert member.returncode == 0, member.stderr
    out = member.stdout
    assert out.count("acked") == 3 and "subject=cli.k0" in out and "ended: ok" in out
    assert "members: ['m1']" in cg(nats_server, capsys, "elastic", "info", s, "cg")
    cg(nats_server, capsys, "elastic", "create-mapping", s, "cg", "m1:0,1", "m2:2,3")
    info = cg(nats_server, capsys, "elastic", "info", s, "cg")
    assert "mapping: m1 -> [0, 1]" in info and "mapping: m2 -> [2, 3]" in info
    assert cg(nats_server, capsys, "elastic", "member-info", s, "cg", "m2") == [
        "member m2: in the membership, NO active instance"
    ]
    cg(nats_server, capsys, "elastic", "delete-mapping", s, "cg")
    cg(nats_server, capsys, "elastic", "delete", s, "cg", "-f")
    assert cg(nats_server, capsys, "elastic", "ls", s) == []
    js.delete_stream(s)


def test_static_commands_and_a_refusal(
    js: JetStream, nats_server: NATSServer, capsys: pytest.CaptureFixture[str]
) -> None:
    s = stream_name("PCGC")
    js.add_stream(
        name=s,
        subjects=["st.*"],
        subject_transform=SubjectTransform(
            src="st.*", dest="{{Partition(2,1)}}.st.{{Wildcard(1)}}"
        ),
    )
    cg(nats_server, capsys, "static", "create", "mapped", s, "cg", "2", "a:0", "b:1")
    info = cg(nats_server, capsys, "static", "info", s, "cg")
    assert "mapping: a -> [0]" in info and "active members: []" in info
    assert (
        main(["--server", nats_server.url, "static", "create", "balanced", s, "cg", "2", "a"]) == 1
    )
    assert "ConsumerGroupExistsError" in capsys.readouterr().err
    cg(nats_server, capsys, "static", "rm", s, "cg", "--force")
    assert cg(nats_server, capsys, "static", "ls", s) == []
    js.delete_stream(s)


def test_help_names_cgs_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["elastic", "--help"])
    out = capsys.readouterr().out
    for command in (
        "ls",
        "info",
        "create",
        "delete",
        "add",
        "drop",
        "create-mapping",
        "delete-mapping",
        "member-info",
        "step-down",
        "consume",
    ):
        assert command in out
