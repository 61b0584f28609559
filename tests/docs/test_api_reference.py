"""The API reference covers every public name: each public module, each name in its
``__all__`` (or, without one, each public name it defines), and each public member of each
class, is in the built site's objects.inv.

The names are enumerated by docs/_ext/jss_apiref.py, the same code that writes the pages: the
test checks what the build made of them, not the enumeration against itself."""

from __future__ import annotations

import enum
import importlib
import inspect
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import jss_apiref


def _py(inventory: Dict[str, Dict[str, str]], name: str) -> List[str]:
    return [role for role in inventory.get(name, {}) if role.startswith("py:")]


def test_the_enumeration_finds_the_public_api() -> None:
    modules = jss_apiref.public_modules()
    for expected in (
        "jetstream_sync",
        "jetstream_sync.errors",
        "jetstream_sync.jetstream.pull",
        "jetstream_sync.micro",
        "jetstream_sync.pcgroups",
        "jetstream_sync.spark",
        "jetstream_sync.otel",
        "jetstream_sync.server",
        "jetstream_sync.testing",
        "jetstream_sync.testpki",
    ):
        assert expected in modules
    assert not [m for m in modules if any(p.startswith("_") for p in m.split("."))]
    assert "connect" in jss_apiref.public_names("jetstream_sync")
    # a module without __all__: the names it defines, not what it imports
    service = jss_apiref.public_names("jetstream_sync.micro.service")
    assert "Service" in service
    assert "Optional" not in service and "dataclass" not in service


def test_every_public_module_has_a_page(inventory: Dict[str, Dict[str, str]]) -> None:
    missing = [m for m in jss_apiref.public_modules() if "py:module" not in inventory.get(m, {})]
    assert not missing, f"public modules without a reference page: {missing}"


def test_every_public_name_is_in_the_reference(inventory: Dict[str, Dict[str, str]]) -> None:
    missing = []
    count = 0
    for modname in jss_apiref.public_modules():
        for name in jss_apiref.public_names(modname):
            count += 1
            if not _py(inventory, f"{modname}.{name}"):
                missing.append(f"{modname}.{name}")
    assert count > 400  # the package's own size today, so an empty walk cannot pass
    assert not missing, f"{len(missing)} public names not in the reference: {missing}"


def _public_members(cls: type) -> List[str]:
    names = set()
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if inspect.isclass(value) and value.__qualname__ != f"{cls.__qualname__}.{name}":
            continue  # a class attribute naming another class: documented where it lives
        names.add(name)
    names.update(n for n in vars(cls).get("__annotations__", {}) if not n.startswith("_"))
    if issubclass(cls, enum.Enum):
        names.update(cls.__members__)
    return sorted(names)


def test_every_public_member_of_a_class_is_in_the_reference(
    inventory: Dict[str, Dict[str, str]],
) -> None:
    missing = []
    count = 0
    for entry in jss_apiref.entries():
        if entry.kind not in ("class", "exception"):
            continue
        cls = entry.obj
        if cls.__name__ != entry.name:
            continue  # an alias: its class is documented under its own name
        for member in _public_members(cls):
            count += 1
            if not _py(inventory, f"{entry.fullname}.{member}"):
                missing.append(f"{entry.fullname}.{member}")
    assert count > 500
    assert not missing, f"{len(missing)} public members not in the reference: {missing}"


def test_a_reexported_name_leads_to_its_home(inventory: Dict[str, Dict[str, str]]) -> None:
    # jetstream_sync.Client is registered on the package's page and links to the class
    top = inventory["jetstream_sync.Client"]["py:class"]
    home = inventory["jetstream_sync.client.Client"]["py:class"]
    assert top.startswith("api/jetstream_sync.html#")
    assert home == "api/jetstream_sync.client.html#jetstream_sync.client.Client"
    client = importlib.import_module("jetstream_sync").Client
    assert client is importlib.import_module("jetstream_sync.client").Client


def test_importing_every_public_module_starts_nothing() -> None:
    # autodoc imports them all: no thread, no process (a server, Spark's JVM), no instrumenting
    script = """
import importlib, os, subprocess, sys, threading
sys.path.insert(0, sys.argv[1])
import jss_apiref
for name in jss_apiref.public_modules():
    importlib.import_module(name)
import jetstream_sync._observe as observe
children = subprocess.run(["ps", "--ppid", str(os.getpid()), "-o", "cmd="],
                          capture_output=True, text=True).stdout.split("\\n")
print(sorted(t.name for t in threading.enumerate()))
print([c for c in children if c and not c.startswith("ps ")])
print(observe.observer)
"""
    ext = str(Path(__file__).resolve().parents[2] / "docs" / "_ext")
    proc = subprocess.run(
        [sys.executable, "-c", script, ext], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    threads, children, observer = proc.stdout.splitlines()
    assert threads == "['MainThread']"
    assert children == "[]"
    assert observer == "None"
