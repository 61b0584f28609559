"""examples/notebook.ipynb runs top to bottom in a real Jupyter kernel and shows what it says.

The kernel is ipykernel's ``python3`` kernel, installed into a temporary directory for this
test so that it runs this interpreter (``sys.executable``), whatever kernels the machine has.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

try:
    import ipykernel.kernelspec
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient
except ImportError as exc:  # they are in the test extra: missing is a setup error, not a skip
    _MISSING: ImportError | None = exc
else:
    _MISSING = None

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "notebook.ipynb"
KERNEL = "python3"
CELL_TIMEOUT = 60  # seconds per cell; the whole notebook takes a few seconds


def _require_packages() -> None:
    if _MISSING is not None:
        pytest.fail(
            f"the notebook test needs nbclient, nbformat and ipykernel ({_MISSING}); "
            "install the test extra: pip install -e '.[test]'",
            pytrace=False,
        )


def _cell(nb: Any, cell_id: str) -> Any:
    for cell in nb.cells:
        if cell.get("id") == cell_id:
            return cell
    raise AssertionError(f"the notebook has no cell with id {cell_id!r}")


def _stdout(nb: Any, cell_id: str) -> str:
    return "".join(
        out.get("text", "")
        for out in _cell(nb, cell_id).outputs
        if out.output_type == "stream" and out.name == "stdout"
    )


def _servers_under(tmpdir: Path) -> list[int]:
    """Pids of nats-server processes whose files are under ``tmpdir`` (Linux /proc)."""
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"nats-server") and str(tmpdir).encode() in b" ".join(argv):
            pids.append(int(proc.name))
    return pids


def test_notebook_is_stored_clean() -> None:
    _require_packages()
    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    nbformat.validate(nb)
    assert nb.nbformat == 4
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, "the notebook has no code cells"
    for cell in code:
        assert cell.outputs == [], f"cell {cell.id!r} is stored with outputs"
        assert cell.execution_count is None, f"cell {cell.id!r} is stored with an execution count"


@pytest.mark.timeout(150)
def test_notebook_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _require_packages()
    # The notebook must start its own embedded server, and the kernel must not pick up the
    # user's IPython profile (startup files) or leave connection files in their home.
    monkeypatch.delenv("NATS_URL", raising=False)
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    # The embedded server keeps its files under the kernel's TMPDIR: any server left running
    # afterwards can be told apart from other tests' servers.
    kernel_tmp = tmp_path / "tmp"
    kernel_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(kernel_tmp))

    # ipykernel's python3 kernelspec, written for this interpreter, found only here.
    spec_dir = ipykernel.kernelspec.install(prefix=str(tmp_path / "jupyter"), kernel_name=KERNEL)
    ksm = KernelSpecManager(kernel_dirs=[str(Path(spec_dir).parent)], ensure_native_kernel=False)
    spec = ksm.get_kernel_spec(KERNEL)
    assert spec.argv[0] == sys.executable, spec.argv
    km = KernelManager(kernel_name=KERNEL, kernel_spec_manager=ksm)

    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    client = NotebookClient(
        nb,
        km=km,
        timeout=CELL_TIMEOUT,
        startup_timeout=60,
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    try:
        client.execute()  # raises CellExecutionError, with the cell and traceback, on failure
    finally:
        # nbclient leaves a kernel it did not start itself running. Shut it down gracefully:
        # its atexit hooks stop the embedded server even when a cell failed before the last.
        if km.has_kernel:
            km.shutdown_kernel(now=False)
        leaked = _servers_under(kernel_tmp)
        for pid in leaked:
            os.kill(pid, signal.SIGKILL)
    assert leaked == [], "the notebook left its nats-server running"

    errors = [
        (cell.id, out.get("ename"))
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.output_type == "error"
    ]
    assert errors == []
    # Nothing on stderr either: no error the client logged, no asyncio warning.
    stderr = {
        cell.id: out.get("text", "")
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.output_type == "stream" and out.name == "stderr"
    }
    assert stderr == {}

    assert "(embedded)" in _stdout(nb, "server")
    assert "nats-network" in _stdout(nb, "connect")
    assert "created stream NOTEBOOK" in _stdout(nb, "stream")
    assert "published 10 messages, stream seq 1..10" in _stdout(nb, "publish")

    fetched = _stdout(nb, "fetch")
    assert "fetched 10 messages:" in fetched, fetched
    assert "'order 0'" in fetched and "'order 9'" in fetched, fetched

    # The callback handled the messages after its cell had ended, on its own thread.
    assert "cell done;" in _stdout(nb, "callback")
    ticks = _stdout(nb, "callback-results")
    expected = [f"tick {i}" for i in range(10)]
    assert f"callback handled 10 ticks: {expected}" in ticks, ticks
    assert "callback ran on: ['nats-sub-" in ticks, ticks

    assert "reply: HELLO FROM A CELL" in _stdout(nb, "request")
    pub_async = _stdout(nb, "publish-async")
    assert "publish_async: 1000 acks, seq 11..1010, outstanding now 0" in pub_async, pub_async

    loop = _stdout(nb, "event-loop")
    assert "this cell runs inside a running event loop: True" in loop, loop
    assert "asyncio.run: RuntimeError:" in loop, loop
    assert "blocking client: reply 'NO AWAIT NEEDED', stream holds 1010 messages" in loop, loop

    assert "client closed: True; embedded server stopped: True" in _stdout(nb, "close")
