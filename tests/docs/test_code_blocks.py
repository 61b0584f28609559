"""Every ``python`` code block of the docs (``docs/**/*.md``) and of README.md runs here.

Each page's blocks run in order, in one namespace (a block may use the ``nc`` or ``js`` an
earlier block of the same page made), in a child process of their own, against an embedded
nats-server with JetStream started for that page. The URL ``nats://127.0.0.1:4222`` in a block
is replaced by that server's URL, and ``url`` is predefined as the same URL (the pages use it
for "your server"). The child's working directory is a fresh temporary directory, so files a
block writes (``hello.txt``, ``build.tar``) land there.

A block that cannot run alone (a fragment, a Spark job needing a session, a program that runs
forever) is marked in the Markdown on the line right before its fence::

    <!-- no-run: the reason it cannot run here -->

and every such mark must give a reason. Nothing else is skipped: a block without the mark that
raises fails the test, naming the page and the line of its fence.
"""

import json
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from jetstream_sync.server import NATSServer

ROOT = Path(__file__).resolve().parents[2]
PLACEHOLDER_URL = "nats://127.0.0.1:4222"
NO_RUN = re.compile(r"^<!--\s*no-run:(.*?)-->\s*$")
FENCE = re.compile(r"^(`{3,}|~{3,})\s*([^\s`{]*)?")
PAGE_TIMEOUT = 150.0  # seconds for all of one page's blocks


@dataclass
class Block:
    """One fenced ``python`` block: where it is, its code, and the no-run reason if marked."""

    page: str
    line: int  # 1-based line of the opening fence
    code: str
    no_run: Optional[str]  # None: runs; a string: the mark's reason ("" if it gave none)


def pages() -> List[Path]:
    """README.md and every Markdown page under docs/, build output left out."""
    found = [p for p in sorted((ROOT / "docs").rglob("*.md")) if "_build" not in p.parts]
    return [ROOT / "README.md", *found]


def blocks_of(path: Path) -> List[Block]:
    """The fenced code blocks of ``path`` whose language is python, in order."""
    rel = path.relative_to(ROOT).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    out: List[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(1), (m.group(2) or "").lower()
        start = i
        i += 1
        body: List[str] = []
        while i < len(lines) and not lines[i].startswith(fence):
            body.append(lines[i])
            i += 1
        i += 1  # the closing fence
        if lang in ("py", "python3", "pycon", "ipython", "ipython3"):
            raise AssertionError(f"{rel}:{start + 1}: write ```python, not ```{lang}, so it runs")
        if lang != "python":
            continue
        prev = start - 1
        while prev >= 0 and not lines[prev].strip():
            prev -= 1
        mark = NO_RUN.match(lines[prev].strip()) if prev >= 0 else None
        reason = mark.group(1).strip() if mark else None
        out.append(Block(rel, start + 1, "\n".join(body) + "\n", reason))
    return out


ALL: Dict[str, List[Block]] = {p.relative_to(ROOT).as_posix(): blocks_of(p) for p in pages()}
RUNNABLE = {page: bs for page, bs in ALL.items() if any(b.no_run is None for b in bs)}

DRIVER = textwrap.dedent(
    """
    import json, os, sys, traceback
    blocks, url = json.load(open(sys.argv[1])), sys.argv[2]
    ns = {"__name__": "__main__", "url": url}
    status = 0
    for b in blocks:
        code = b["code"].replace(PLACEHOLDER, url)
        try:
            exec(compile(code, f"{b['page']}:{b['line']}", "exec"), ns)
        except BaseException:
            print(f"BLOCK FAILED: {b['page']} line {b['line']}", flush=True)
            traceback.print_exc()
            status = 1
            break
        print(f"block ok: {b['page']} line {b['line']}", flush=True)
    import jetstream_sync
    for value in list(ns.values()):  # clients the page left open
        if isinstance(value, jetstream_sync.Client) and not value.is_closed:
            value.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # threads a page started (a consume, a service) do not hold the exit
    """
).replace("PLACEHOLDER", repr(PLACEHOLDER_URL))


def test_the_pages_have_python_blocks() -> None:
    """The collector finds the guides' blocks (a wrong glob would run nothing)."""
    assert "README.md" in RUNNABLE
    assert sum(len(bs) for bs in ALL.values()) >= 30
    assert any(page.startswith("docs/guides/") for page in RUNNABLE)


def test_every_block_that_does_not_run_says_why() -> None:
    unexplained = [f"{b.page}:{b.line}" for bs in ALL.values() for b in bs if b.no_run == ""]
    assert not unexplained, f"<!-- no-run: ... --> without a reason at {unexplained}"


def test_every_block_parses() -> None:
    """Marked blocks are still Python: a fragment must at least compile."""
    for bs in ALL.values():
        for b in bs:
            compile(b.code, f"{b.page}:{b.line}", "exec")


@pytest.mark.parametrize("page", sorted(RUNNABLE))
def test_page_blocks_run(page: str, tmp_path: Path) -> None:
    blocks = [b.__dict__ for b in RUNNABLE[page] if b.no_run is None]
    (tmp_path / "blocks.json").write_text(json.dumps(blocks))
    (tmp_path / "driver.py").write_text(DRIVER)
    work = tmp_path / "cwd"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("NATS_URL", None)
    with NATSServer(jetstream=True) as srv:
        argv = [sys.executable, str(tmp_path / "driver.py"), str(tmp_path / "blocks.json"), srv.url]
        try:
            done = subprocess.run(
                argv,
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=PAGE_TIMEOUT,
            )
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            pytest.fail(f"{page}: blocks still running after {PAGE_TIMEOUT} s\n{out}")
    assert done.returncode == 0, f"{page}:\n{done.stdout}\n{done.stderr}"
    assert done.stdout.count("block ok:") == len(blocks), done.stdout
