"""The shape of the package (issue 19), checked from the source: JetStream and Spark use the
core only through the seam (_seam.py), no core module imports jetstream/ or spark/ (but for
Client.jetstream()'s lazy import), and no class outgrows a newcomer's hour."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, List, Set, Tuple

PKG = Path(__file__).resolve().parents[2] / "jetstream_sync"
UPPER = ("jetstream", "spark", "micro", "pcgroups", "otel")  # the packages built on the core
MAX_CLASS_LINES = 600


def _modules() -> Dict[str, Path]:
    mods = {}
    for path in PKG.rglob("*.py"):
        parts = path.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = path
    return mods


def _is_upper(module: str) -> bool:
    parts = module.split(".")
    return len(parts) > 1 and parts[1] in UPPER


def _imports(name: str, path: Path) -> List[Tuple[str, ast.AST, List[ast.AST]]]:
    """(imported module, the import node, its enclosing nodes) for every import in a file."""
    found: List[Tuple[str, ast.AST, List[ast.AST]]] = []
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]

    def visit(node: ast.AST, outer: List[ast.AST]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ImportFrom):
                base = package
                for _ in range(max(0, child.level - 1)):
                    base = base.rsplit(".", 1)[0]
                mod = child.module or ""
                target = (base + ("." + mod if mod else "")) if child.level else mod
                found.append((target, child, outer))
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    found.append((alias.name, child, outer))
            visit(child, [*outer, child])

    visit(ast.parse(path.read_text()), [])
    return found


def test_jetstream_and_spark_use_no_private_name_of_the_client() -> None:
    pattern = re.compile(r"\b_?nc\._[a-z_]+|\bclient\._[a-z_]+")
    hits = [
        f"{path.relative_to(PKG.parent)}:{n}: {line.strip()}"
        for sub in UPPER
        for path in sorted((PKG / sub).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert hits == [], "use the seam (jetstream_sync._seam.Core) instead:\n" + "\n".join(hits)


def test_no_core_module_imports_jetstream_or_spark_but_client_jetstream_lazily() -> None:
    bad = []
    for name, path in _modules().items():
        if _is_upper(name) or name == "jetstream_sync" or path.name == "testing.py":
            continue  # the package's face and the pytest plugin stand above everything
        for target, _node, outer in _imports(name, path):
            if not target.startswith("jetstream_sync.") or not _is_upper(target):
                continue
            in_type_checking = any(
                isinstance(o, ast.If) and "TYPE_CHECKING" in ast.unparse(o.test) for o in outer
            )
            in_jetstream_method = any(
                isinstance(o, ast.FunctionDef) and o.name == "jetstream" for o in outer
            )
            if name == "jetstream_sync.client" and (in_type_checking or in_jetstream_method):
                continue  # the one allowed way up: Client.jetstream() makes the context
            bad.append(f"{name} imports {target}")
    assert bad == []


def test_the_core_and_jetstream_import_each_other_in_no_circle() -> None:
    mods = _modules()
    edges: Dict[str, Set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        for target, node, _outer in _imports(name, path):
            names = [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else []
            # "from . import errors" imports the module errors, not the package's face
            subs = [f"{target}.{n}" for n in names if f"{target}.{n}" in mods]
            for cand in subs or [target]:
                if cand in mods and cand != name:
                    edges[name].add(cand)
    # The allowed lazy import (checked above) is the only arrow from the core up.
    edges["jetstream_sync.client"].discard("jetstream_sync.jetstream.context")

    def reach(start: str) -> Set[str]:
        seen, todo = {start}, [start]
        while todo:
            for nxt in edges[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    core = [m for m in mods if not _is_upper(m) and m != "jetstream_sync"]
    loops = [
        (c, u)
        for c in core
        for u in reach(c)
        if _is_upper(u) and c in reach(u) and not c.endswith("testing")
    ]
    assert loops == []


def test_no_class_is_over_600_lines() -> None:
    big = []
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_CLASS_LINES:
                    big.append(f"{path.relative_to(PKG.parent)}: {node.name} ({lines} lines)")
    assert big == []


def test_the_client_class_reads_as_the_public_api() -> None:
    """client.py's Client keeps to the public face: its private methods are few, and the
    rooms do the work (issue 19: 'client.py reads top to bottom as the public API')."""
    tree = ast.parse((PKG / "client.py").read_text())
    (client,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Client"]
    methods = [n.name for n in client.body if isinstance(n, ast.FunctionDef)]
    private = [m for m in methods if m.startswith("_") and not m.startswith("__")]
    assert len(private) <= 5, private
