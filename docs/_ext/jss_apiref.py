"""The API reference of the docs site, generated from the package itself at build time.

Every public module of ``jetstream_sync`` (no path component starting with ``_``) gets a page,
``docs/api/<module>.rst``, written here before Sphinx reads its sources (these files are build
output: see .gitignore). A page documents, with autodoc, every public name *homed* in its
module, and lists the names it re-exports from other modules, each linked to its home and
registered under the re-exported name too, so ``jetstream_sync.Client`` and
``jetstream_sync.client.Client`` are both in ``objects.inv``.

A module's public names are its ``__all__``, or without one the names not starting with ``_``
that it defines (classes and functions whose ``__module__`` is the module, and names assigned
at its top level). A name's home is the public module that defines it; for one defined in a
private module, the deepest public module that exports it.

``tests/docs/test_api_reference.py`` imports this module to enumerate the same names and
checks each is in the built site's inventory.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import pkgutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

PACKAGE = "jetstream_sync"


def public_modules(package: str = PACKAGE) -> List[str]:
    """The importable public modules of ``package``, sorted, the package itself first."""
    root = importlib.import_module(package)
    names = [package]
    for info in pkgutil.walk_packages(root.__path__, prefix=package + "."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        names.append(info.name)
    return sorted(names)


def _top_level_assignments(module: Any) -> List[str]:
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):
        return []
    names: List[str] = []
    for node in ast.parse(source).body:
        targets: List[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Name):
                names.append(target.id)
    return names


def public_names(modname: str) -> List[str]:
    """The public names of the module ``modname``: its ``__all__``, else what it defines."""
    module = importlib.import_module(modname)
    explicit = getattr(module, "__all__", None)
    if explicit is not None:
        return sorted(set(explicit))
    found = set()
    for name, value in vars(module).items():
        if name.startswith("_") or inspect.ismodule(value):
            continue
        if (inspect.isclass(value) or inspect.isfunction(value)) and getattr(
            value, "__module__", None
        ) == modname:
            found.add(name)
    for name in _top_level_assignments(module):
        if not name.startswith("_") and hasattr(module, name):
            value = getattr(module, name)
            if not inspect.ismodule(value) and not isinstance(value, type(Any)):
                found.add(name)
    return sorted(found)


@dataclass(frozen=True)
class Entry:
    """One public object: its name, the modules that export it, and its home among them."""

    name: str
    obj: Any
    modules: Tuple[str, ...]
    home: str

    @property
    def fullname(self) -> str:
        """The name the object is documented under."""
        return f"{self.home}.{self.name}"

    @property
    def kind(self) -> str:
        """The autodoc directive that documents it (without the ``auto`` prefix)."""
        obj = self.obj
        if inspect.isclass(obj):
            return "exception" if issubclass(obj, BaseException) else "class"
        if inspect.isfunction(obj) or inspect.isbuiltin(obj) or inspect.ismethod(obj):
            return "function"
        return "data"

    @property
    def objtype(self) -> str:
        """The Python domain object type the documented name is registered as."""
        kind = self.kind
        return "data" if kind == "data" else kind


def _defines(modname: str, name: str, obj: Any) -> bool:
    if inspect.isclass(obj) or inspect.isfunction(obj):
        return getattr(obj, "__module__", None) == modname and obj.__name__ == name
    module = importlib.import_module(modname)
    return name in _top_level_assignments(module)


def entries(package: str = PACKAGE) -> List[Entry]:
    """Every public object of ``package``, once (an alias under another name counts apart)."""
    exported: Dict[Tuple[str, int], List[str]] = {}
    objects: Dict[Tuple[str, int], Any] = {}
    for modname in public_modules(package):
        module = importlib.import_module(modname)
        for name in public_names(modname):
            if not hasattr(module, name):
                raise AttributeError(f"{modname}.__all__ names {name!r}, which it lacks")
            obj = getattr(module, name)
            key = (name, id(obj))
            exported.setdefault(key, []).append(modname)
            objects[key] = obj
    result = []
    for key, modules in exported.items():
        name, obj = key[0], objects[key]
        defining = [m for m in modules if _defines(m, name, obj)]
        pool = defining or modules
        home = sorted(pool, key=lambda m: (-m.count("."), m))[0]
        result.append(Entry(name, obj, tuple(sorted(modules)), home))
    return sorted(result, key=lambda e: (e.home, e.name))


def _title(modname: str, module: Any) -> str:
    return modname.replace("_", r"\_")


def render_page(modname: str, all_entries: List[Entry]) -> str:
    """The reST source of ``modname``'s reference page."""
    module = importlib.import_module(modname)
    title = _title(modname, module)
    lines = [
        ".. This file is generated by docs/_ext/jss_apiref.py at build time: do not edit.",
        "",
        title,
        "=" * len(title),
        "",
        f".. automodule:: {modname}",
        "   :no-members:",
        "",
    ]
    homed = [e for e in all_entries if e.home == modname]
    reexported = sorted(
        (e for e in all_entries if modname in e.modules and e.home != modname),
        key=lambda e: (e.name.lower(), e.name),
    )
    if reexported:
        lines += [
            "Also importable from here",
            "-------------------------",
            "",
            f"``{modname}`` re-exports these names; each is documented in its home module.",
            "",
            f".. jss-reexports:: {modname}",
            "",
        ]
        for e in reexported:
            lines.append(f"   {e.name} {e.fullname} {e.objtype}")
        lines.append("")
    if homed:
        if reexported:
            lines += ["Defined here", "------------", ""]
        for e in homed:
            lines.append(f".. auto{e.kind}:: {e.fullname}")
            if e.kind in ("class", "exception"):
                lines += ["   :members:", "   :undoc-members:", "   :show-inheritance:"]
            lines.append("")
    return "\n".join(lines)


def write_pages(outdir: Path, package: str = PACKAGE) -> List[str]:
    """Write every module's page into ``outdir`` (only the ones that changed); their names."""
    outdir.mkdir(parents=True, exist_ok=True)
    all_entries = entries(package)
    written = []
    for modname in public_modules(package):
        path = outdir / f"{modname}.rst"
        text = render_page(modname, all_entries)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            # atomically: two builds at once (pytest-xdist workers) never read half a page
            partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            partial.write_text(text, encoding="utf-8")
            os.replace(partial, path)
        written.append(path.name)
    for stale in outdir.glob(f"{package}*.rst"):
        if stale.name not in written:
            stale.unlink()
    return written


# --- the Sphinx side ----------------------------------------------------------------------


def _setup_directive() -> Any:
    from docutils import nodes
    from sphinx import addnodes
    from sphinx.util.docutils import SphinxDirective

    class ReExports(SphinxDirective):
        """``.. jss-reexports:: module`` with lines ``name target objtype``: a list of links,
        each name registered in the Python domain as an alias of ``module.name``."""

        required_arguments = 1
        has_content = True

        def run(self) -> List[Any]:
            modname = self.arguments[0]
            domain: Any = self.env.get_domain("py")
            items = nodes.bullet_list()
            for line in self.content:
                name, target, objtype = line.split()
                fullname = f"{modname}.{name}"
                node_id = "reexport-" + fullname.replace(".", "-").lower()
                paragraph = nodes.paragraph()
                anchor = nodes.target("", "", ids=[node_id])
                paragraph += anchor
                paragraph += nodes.literal(name, name)
                paragraph += nodes.Text(": ")
                ref = addnodes.pending_xref(
                    "",
                    refdomain="py",
                    reftype="obj",
                    reftarget=target,
                    refexplicit=True,
                    refwarn=True,
                )
                ref += nodes.literal(target, target, classes=["xref", "py", "py-obj"])
                paragraph += ref
                domain.note_object(
                    fullname, objtype, node_id, aliased=True, location=self.get_location()
                )
                items += nodes.list_item("", paragraph)
            return [items]

    return ReExports


def _builtins_stay_builtins(app: Any, doctree: Any) -> None:
    # A type written ``bytes`` in a field list is looked up "specifically": every attribute
    # named bytes (StreamState.bytes, BucketStatus.bytes...) matches, and Sphinx warns and
    # links the first. A builtin's name means the builtin: look it up exactly (it is not in
    # this site, so it stays plain text).
    import builtins

    from sphinx import addnodes

    for node in doctree.findall(addnodes.pending_xref):
        if node.get("refdomain") == "py" and hasattr(builtins, node.get("reftarget", "")):
            # the domain searches "specifically" when the attribute is present at all
            node.attributes.pop("refspecific", None)


def _generate(app: Any) -> None:
    write_pages(Path(app.srcdir) / "api")


def setup(app: Any) -> Dict[str, Any]:
    """Register the page generator and the ``jss-reexports`` directive."""
    app.add_directive("jss-reexports", _setup_directive())
    app.connect("builder-inited", _generate)
    app.connect("doctree-read", _builtins_stay_builtins)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}


def main(argv: Optional[List[str]] = None) -> int:
    """``python docs/_ext/jss_apiref.py``: print every public name and its home."""
    for e in entries():
        print(f"{e.fullname:80} {e.kind:9} exported by {', '.join(e.modules)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
