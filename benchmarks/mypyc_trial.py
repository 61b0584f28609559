"""Compile some modules with mypyc in a throw-away copy of the tree; count or test that copy.

Usage::

    python benchmarks/mypyc_trial.py                                  # the default modules
    python benchmarks/mypyc_trial.py --icount --paths flood fetch --libs ours --runs 1
    python benchmarks/mypyc_trial.py --modules _protocol msg _reader --tests tests/unit

The working tree itself is never touched: its files (tracked and untracked, not ignored) are
copied to a temporary directory, ``mypyc`` (``pip install mypy``; it needs a C compiler and
the Python headers) builds the named modules there, and the copy's ``benchmarks/icount.py``
or pytest (one process per test file, so that a crash ends only that file) runs on it. The
package has no build step; this is a measurement, see benchmarks/README.md, "mypyc".
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
from typing import List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = ["_protocol", "msg"]
# What some compiled classes must declare: the (pure) JetStream context subclasses
# PullSubscriber; the client keeps a WeakSet of live clients (native classes have no
# weak references).
DECLARE = {
    "jetstream/pull": ("class PullSubscriber:", "allow_interpreted_subclasses=True"),
    "client": ("class Client:", "native_class=False"),
}


def copy_tree(dest: str) -> None:
    names = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    for name in filter(None, names):
        src = os.path.join(ROOT, name)
        if os.path.isfile(src):
            os.makedirs(os.path.dirname(os.path.join(dest, name)), exist_ok=True)
            shutil.copy2(src, os.path.join(dest, name))


def patch_client(path: str) -> None:
    """What compiled client.py needs: mypyc's locals() is not the function's arguments, and a
    method alias in a class body is unsupported (it is left unset, with a pending error)."""
    with open(path) as f:
        text = f.read()
    names: List[str] = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef) and node.name == "connect" and node.args.args:
            args = node.args.args
            if args[0].arg == "self":
                names = [a.arg for a in args[1:] + node.args.kwonlyargs]
    explicit = "options = dict(" + ", ".join(f"{n}={n}" for n in names) + ")"
    text = text.replace('options = dict(locals())\n        del options["self"]', explicit, 1)
    alias = "    def jsm(self, *args: Any, **kwargs: Any) -> JetStream:\n"
    alias += "        return self.jetstream(*args, **kwargs)\n"
    text = text.replace("    jsm = jetstream\n", alias, 1)
    with open(path, "w") as f:
        f.write(text)


def build(dest: str, modules: List[str]) -> None:
    if "client" in modules:
        patch_client(os.path.join(dest, "jetstream_sync", "client.py"))
    for mod, (line, attr) in DECLARE.items():
        if mod in modules:
            path = os.path.join(dest, "jetstream_sync", mod + ".py")
            with open(path) as f:
                text = f.read()
            deco = f"from mypy_extensions import mypyc_attr\n\n\n@mypyc_attr({attr})\n"
            with open(path, "w") as f:
                f.write(text.replace("\n" + line, "\n" + deco + line, 1))
    files = [os.path.join("jetstream_sync", m + ".py") for m in modules]
    proc = subprocess.run(
        [sys.executable, "-m", "mypyc", *files], cwd=dest, capture_output=True, text=True
    )
    for line in proc.stdout.splitlines() + proc.stderr.splitlines():
        if "error:" in line or "warning:" in line:
            print(line, file=sys.stderr)
    if proc.returncode != 0:
        sys.exit(f"mypyc failed ({proc.returncode})")


def run_tests(dest: str, paths: List[str]) -> None:
    files: List[str] = []
    for p in paths:
        full = os.path.join(dest, p)
        if os.path.isdir(full):
            found = sorted(
                f for f in os.listdir(full) if f.startswith("test_") and f.endswith(".py")
            )
            files += [os.path.join(p, f) for f in found]
        else:
            files.append(p)
    for f in files:
        cmd = [sys.executable, "-m", "pytest", f, "-q", "-p", "no:cacheprovider"]
        proc = subprocess.run(cmd, cwd=dest, capture_output=True, text=True)
        lines = (proc.stdout + proc.stderr).strip().splitlines()
        status = "" if proc.returncode in (0, 1) else f" [exit {proc.returncode}]"
        print(f"{f}: {lines[-1] if lines else '?'}{status}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--modules", nargs="+", default=DEFAULT, help="under jetstream_sync/, no .py")
    ap.add_argument("--tests", nargs="+", default=[], help="test files or directories")
    ap.add_argument("--icount", action="store_true", help="run icount.py; other args go to it")
    ap.add_argument("--keep", action="store_true", help="keep the compiled copy")
    args, rest = ap.parse_known_args()
    dest = tempfile.mkdtemp(prefix="mypyc-trial-")
    try:
        copy_tree(dest)
        build(dest, args.modules)
        print(f"compiled {', '.join(args.modules)} in {dest}", flush=True)
        if args.tests:
            run_tests(dest, args.tests)
        if args.icount:
            icount = os.path.join(dest, "benchmarks", "icount.py")
            subprocess.run([sys.executable, icount, *rest], cwd=dest, check=True)
    finally:
        if args.keep:
            print(f"kept {dest}")
        else:
            shutil.rmtree(dest, ignore_errors=True)


if __name__ == "__main__":
    main()
