"""nats-py's own test files, fetched from PyPI and ported by deleting ``async``/``await``.

The tests are nats-py's, not ours: the sdist of nats-py 2.14.0 (the newest release whose
sdist ships its ``tests/``) is downloaded once from PyPI, checked against its sha256, and
kept in a cache; none of it is committed here. :func:`port` changes the source mechanically:

* ``async def`` / ``async for`` / ``async with`` lose ``async``;
* ``await x`` becomes ``await_(x)``: a future's result, and anything else unchanged — so on a
  plain call, exactly the deletion of ``await``;
* ``mock.AsyncMock`` (a mock coroutine function) becomes ``mock.MagicMock``;
* a coroutine call handed to ``asyncio.create_task``, ``ensure_future``, ``gather`` or
  ``wait_for`` becomes a ``lambda``, so that it still runs concurrently (on a thread) and
  ``wait_for`` can still time it out.

Nothing else changes: every assertion stays. Imports are mapped while the module runs, not
in the text: ``nats`` (and ``nats.aio.client``, ``nats.js.api``, ...) names jetstream_sync,
``asyncio`` names :mod:`natspy_threadio`, ``tests.utils`` names :mod:`natspy_harness`. A name
nats-py has and we lack imports as a stand-in that fails the test that uses it, naming it,
so one missing name does not hide a whole file.
"""

from __future__ import annotations

import ast
import builtins
import functools
import hashlib
import importlib
import marshal
import os
import sys
import tarfile
import types
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, TypeVar

NATS_PY_VERSION = "2.14.0"
SDIST_URL = (
    "https://files.pythonhosted.org/packages/c3/f8/"
    "b956c4621ba88748ed707c52e69f95b7a50c8914e750edca59a5bef84a76/"
    f"nats_py-{NATS_PY_VERSION}.tar.gz"
)
SDIST_SHA256 = "4ed02cb8e3b55c68074a063aa2687087115d805d1513297da90cb2068fb07bed"

CONCURRENT = {"create_task", "ensure_future", "gather", "wait_for"}


class Unavailable(Exception):
    """The sdist could not be had (no network, a wrong checksum): the tests skip."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "jetstream_sync" / f"nats_py-{NATS_PY_VERSION}"


def download(url: str, sha256: str, root: Path) -> Path:
    """The file at ``url`` in ``root`` (downloaded once, checked against its sha256)."""
    root.mkdir(parents=True, exist_ok=True)
    archive = root / url.rpartition("/")[2]
    if not archive.exists():
        try:
            with urllib.request.urlopen(url, timeout=60) as resp:
                data = resp.read()
        except OSError as exc:
            raise Unavailable(f"cannot download {url}: {exc}") from exc
        digest = hashlib.sha256(data).hexdigest()
        if digest != sha256:
            raise Unavailable(f"{url}: sha256 {digest}, expected {sha256}")
        tmp = archive.with_suffix(".part")
        tmp.write_bytes(data)
        tmp.replace(archive)
    return archive


def tests_dir() -> Path:
    """nats-py's ``tests/``, extracted from its sdist (downloaded on first use)."""
    root = cache_dir()
    done = root / "tests" / ".extracted"
    if done.exists():
        return root / "tests"
    archive = download(SDIST_URL, SDIST_SHA256, root)
    prefix = f"nats_py-{NATS_PY_VERSION}/tests/"
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if (
                member.isfile()
                and member.name.startswith(prefix)
                and "/" not in member.name[len(prefix) :]
            ):
                target = root / "tests" / member.name[len(prefix) :]
                target.parent.mkdir(parents=True, exist_ok=True)
                src = tar.extractfile(member)
                assert src is not None
                target.write_bytes(src.read())
    done.touch()
    return root / "tests"


# --- the port ----------------------------------------------------------------------------


class _Port(ast.NodeTransformer):
    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> Any:
        self.generic_visit(node)
        new = ast.FunctionDef(**{f: getattr(node, f) for f in node._fields})  # type: ignore[arg-type]
        return ast.copy_location(new, node)

    def visit_AsyncFor(self, node: ast.AsyncFor) -> Any:
        self.generic_visit(node)
        return ast.copy_location(ast.For(**{f: getattr(node, f) for f in node._fields}), node)

    def visit_AsyncWith(self, node: ast.AsyncWith) -> Any:
        self.generic_visit(node)
        return ast.copy_location(ast.With(**{f: getattr(node, f) for f in node._fields}), node)

    def visit_Await(self, node: ast.Await) -> Any:
        self.generic_visit(node)
        call = ast.Call(func=ast.Name(id="await_", ctx=ast.Load()), args=[node.value], keywords=[])
        return ast.copy_location(call, node)

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        # unittest.mock's AsyncMock is the Mock of coroutine functions; on threads a
        # callback is a plain function, whose Mock is MagicMock.
        self.generic_visit(node)
        if node.attr == "AsyncMock":
            node.attr = "MagicMock"
        return node

    def visit_ListComp(self, node: ast.ListComp) -> Any:
        self.generic_visit(node)
        for comp in node.generators:
            comp.is_async = 0
        return node

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "asyncio"
            and func.attr in CONCURRENT
        ):
            node.args = [self._later(arg) for arg in node.args]
        return node

    @staticmethod
    def _later(arg: ast.expr) -> ast.expr:
        # A coroutine call, not yet run: a lambda the thread shim runs concurrently. A call
        # already wrapped in await_ (an awaited coroutine) is unwrapped first.
        if isinstance(arg, ast.Call) and not (
            isinstance(arg.func, ast.Name) and arg.func.id == "await_"
        ):
            empty = ast.arguments(
                posonlyargs=[],
                args=[],
                vararg=None,
                kwonlyargs=[],
                kw_defaults=[],
                kwarg=None,
                defaults=[],
            )
            return ast.copy_location(ast.Lambda(args=empty, body=arg), arg)
        return arg


def port(source: str, filename: str) -> types.CodeType:
    def make() -> types.CodeType:
        tree = _Port().visit(ast.parse(source, filename))
        ast.fix_missing_locations(tree)
        return compile(tree, filename, "exec")

    return _cached("port", source + "\0" + filename, make)


_T = TypeVar("_T")


def _cached(kind: str, source: str, make: Callable[[], _T]) -> _T:
    """``make()``, kept in the cache beside the sdist (marshal), keyed by the source, this
    file and the Python: every xdist worker imports the ported modules to collect them, and
    parsing, porting and compiling nats-py's three files took each worker ~0.8 s of CPU."""
    key = hashlib.sha256(
        "\0".join((kind, source, sys.version, _own_digest())).encode()
    ).hexdigest()[:32]
    path = cache_dir() / "ported" / f"{kind}-{key}.marshal"
    try:
        return marshal.loads(path.read_bytes())  # type: ignore[no-any-return]
    except (OSError, ValueError, EOFError, TypeError):
        pass  # not made yet (or unreadable): made here
    value = make()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.part")
        tmp.write_bytes(marshal.dumps(value))  # type: ignore[arg-type]  # (code, str list)
        tmp.replace(path)  # whole or not at all, for the other workers reading it
    except OSError:
        pass  # a cache that cannot be written only costs the time it would save
    return value


@functools.cache
def _own_digest() -> str:
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


# --- nats-py's module names, mapped to ours ------------------------------------------------

# nats-py module -> (our module, extra names). Extra names are nats-py names ours spell
# differently; a module of ours that is not there yet maps to None.
_MODULES: Dict[str, Tuple[Optional[str], Mapping[str, str]]] = {
    "nats": ("jetstream_sync", {}),
    "nats.errors": ("jetstream_sync.errors", {}),
    "nats.aio": ("jetstream_sync", {}),
    "nats.aio.client": ("jetstream_sync.client", {"__version__": "jetstream_sync.__version__"}),
    "nats.aio.errors": ("jetstream_sync.errors", {}),
    "nats.aio.msg": ("jetstream_sync.msg", {}),
    "nats.aio.subscription": ("jetstream_sync.subscription", {}),
    "nats.js": ("jetstream_sync.jetstream", {}),
    "nats.js.api": ("jetstream_sync.jetstream.api", {}),
    "nats.js.errors": ("jetstream_sync.errors", {}),
    "nats.js.client": ("jetstream_sync.jetstream", {"JetStreamContext": "JetStream"}),
    "nats.js.manager": ("jetstream_sync.jetstream.manager", {}),
    "nats.js.kv": ("jetstream_sync.jetstream.kv", {}),
    "nats.js.object_store": ("jetstream_sync.jetstream.object_store", {}),
    "nats.micro": ("jetstream_sync.micro", {}),
    "nats.micro.service": ("jetstream_sync.micro.service", {}),
    "nats.micro.request": ("jetstream_sync.micro.request", {}),
    "nats.nuid": ("jetstream_sync._nuid", {}),
}


class Missing:
    """A nats-py name we do not have: importing it works, using it fails and names it."""

    def __init__(self, name: str) -> None:
        self._name = name

    def _fail(self, *_: Any, **__: Any) -> Any:
        raise NotImplementedError(f"jetstream_sync has no {self._name} (nats-py has)")

    __call__ = _fail

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        self._fail()

    def __repr__(self) -> str:
        return f"<missing {self._name}>"


class _NatsModule(types.ModuleType):
    """One nats-py module, seen through ours: its names are ours, missing ones stand in."""

    def __init__(self, name: str, ours: Optional[types.ModuleType], extra: Mapping[str, str]):
        super().__init__(name)
        self._ours = ours
        self._extra = extra
        public = (
            []
            if ours is None
            else getattr(ours, "__all__", None) or [n for n in vars(ours) if not n.startswith("_")]
        )
        self.__all__ = list(public)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr not in self._extra:
            raise AttributeError(attr)
        child = f"{self.__name__}.{attr}"
        if child in _MODULES:
            return _module(child)
        if attr in self._extra:
            mod, _, name = self._extra[attr].rpartition(".")
            return getattr(importlib.import_module(mod), name)
        if self._ours is not None and hasattr(self._ours, attr):
            return getattr(self._ours, attr)
        return Missing(f"{self.__name__}.{attr}")


_CACHE: Dict[str, _NatsModule] = {}


def _module(name: str) -> _NatsModule:
    if name not in _CACHE:
        ours_name, extra = _MODULES[name]
        try:
            ours = importlib.import_module(ours_name) if ours_name else None
        except ImportError:
            ours = None
        _CACHE[name] = _NatsModule(name, ours, extra)
    return _CACHE[name]


def missing_modules(source: str) -> list[str]:
    """The nats modules a test file imports that we do not have (a reason to skip it)."""
    imported = _cached("imports", source, lambda: _imported_modules(source))
    return sorted({name for name in imported if name in _MODULES and _module(name)._ours is None})


def _imported_modules(source: str) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def _importer(harness: types.ModuleType, threadio: types.ModuleType) -> Any:
    real = builtins.__import__

    def imp(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0):
        if level == 0:
            if name == "asyncio":
                return threadio
            if name == "tests.utils" or name == "tests":
                return harness if fromlist else types.SimpleNamespace(utils=harness)
            if name == "nats" or name.startswith("nats."):
                if name not in _MODULES:
                    raise ImportError(f"the port maps no module {name!r}")
                return _module(name) if fromlist else _module("nats")
        return real(name, globals, locals, fromlist, level)

    return imp


def on_nats_py() -> bool:
    """``NATSPY_RUN=nats-py``: run nats-py's tests unported, on nats-py itself (the baseline:
    what nats-py passes on this server and this harness)."""
    return os.environ.get("NATSPY_RUN") == "nats-py"


def _baseline_importer(harness: types.ModuleType) -> Any:
    real = builtins.__import__

    def imp(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0):
        if level == 0 and name in ("tests.utils", "tests"):
            return harness if fromlist else types.SimpleNamespace(utils=harness)
        return real(name, globals, locals, fromlist, level)

    return imp


def load(filename: str, module_name: str) -> Dict[str, Any]:
    """Port nats-py's ``tests/<filename>`` and run it: its namespace (test classes in it)."""
    import natspy_harness
    import natspy_threadio

    path = tests_dir() / filename
    source = path.read_text()
    builtins_ns = dict(vars(builtins))
    if on_nats_py():
        code = compile(source, str(path), "exec")
        builtins_ns["__import__"] = _baseline_importer(natspy_harness)
    else:
        code = port(source, str(path))
        builtins_ns["__import__"] = _importer(natspy_harness, natspy_threadio)
    namespace: Dict[str, Any] = {
        "__name__": module_name,
        "__file__": str(path),
        "__builtins__": builtins_ns,
        "await_": natspy_threadio.await_,
    }
    exec(code, namespace)
    return namespace


def collect(filename: str, module_globals: Dict[str, Any]) -> None:
    """Body of each ``test_natspy_*.py``: put the ported test classes of nats-py's
    ``tests/<filename>`` into the calling module (or skip it, saying why)."""
    import pytest

    try:
        source = (tests_dir() / filename).read_text()
    except Unavailable as exc:
        pytest.skip(f"nats-py's tests could not be had: {exc}", allow_module_level=True)
    missing = [] if on_nats_py() else missing_modules(source)
    if missing:
        pytest.skip(f"jetstream_sync has no {', '.join(missing)} yet", allow_module_level=True)
    ported = load(filename, module_globals["__name__"])
    module_globals.update({k: v for k, v in ported.items() if not k.startswith("__")})
