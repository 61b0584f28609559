"""The docs site, built once per test session into a temporary directory (the same command
as docs/build: warnings are errors), for the API reference test and the browser test.

Skips (with the reason) when Sphinx or the theme is not installed; a build that fails is a
failure, with Sphinx's output."""

from __future__ import annotations

import fcntl
import importlib.util
import os
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Dict

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))


def _missing_build_tools() -> str:
    for module, extra in (("sphinx", "sphinx"), ("furo", "furo"), ("myst_parser", "myst-parser")):
        if importlib.util.find_spec(module) is None:
            return f"{extra} is not installed (pip install -e '.[docs]')"
    return ""


@pytest.fixture(scope="session")
def docs_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built site's html directory: built once per run, under pytest-xdist too (the
    workers share the run's temporary root; the first to take the lock builds)."""
    missing = _missing_build_tools()
    if missing:
        pytest.skip(missing)
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    out = root / "jss-docs"
    with open(root / "jss-docs.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        failed = out / "failed.txt"
        if not (out / "html" / "objects.inv").is_file() and not failed.is_file():
            _build(out)
    if failed.is_file():
        pytest.fail(failed.read_text(), pytrace=False)
    return out / "html"


def _build(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "sphinx",
        "-W",
        "--keep-going",
        "-q",
        "-b",
        "html",
        "-d",
        str(out / "doctrees"),
        str(DOCS),
        str(out / "html"),
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        (out / "failed.txt").write_text(
            f"the docs build failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )


def read_inventory(path: Path) -> Dict[str, Dict[str, str]]:
    """objects.inv (Sphinx's version 2 format) as {name: {domain:role: uri}}."""
    raw = path.read_bytes()
    header_end = 0
    for _ in range(4):
        header_end = raw.index(b"\n", header_end) + 1
    header = raw[:header_end].decode()
    assert header.startswith("# Sphinx inventory version 2"), header
    assert "zlib" in header, header
    entries: Dict[str, Dict[str, str]] = {}
    for line in zlib.decompress(raw[header_end:]).decode().splitlines():
        # name domain:role priority uri dispname (the name itself has no space for Python)
        name, role, _prio, uri = line.split(" ", 4)[:4]
        if uri.endswith("$"):
            uri = uri[:-1] + name
        entries.setdefault(name, {})[role] = uri
    return entries


@pytest.fixture(scope="session")
def inventory(docs_html: Path) -> Dict[str, Dict[str, str]]:
    """The built site's objects.inv."""
    return read_inventory(docs_html / "objects.inv")
