"""Every annotation in the package evaluates on the running Python (CI runs this on 3.9 too).

``from __future__ import annotations`` keeps annotations lazy, so ``str | None`` or
``list[str]`` import fine on 3.9, but ``typing.get_type_hints`` (dataclass introspection,
documentation tools, users' own checks) evaluates them, and on 3.9 those raise TypeError.
Names imported only for type checking stay unresolved (NameError): that is expected.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
import typing
from typing import List

import jetstream_sync


def _modules() -> List[object]:
    mods: List[object] = []
    for info in pkgutil.walk_packages(jetstream_sync.__path__, "jetstream_sync."):
        if info.name.startswith("jetstream_sync.spark.") and (
            importlib.util.find_spec("pyspark") is None
        ):
            continue  # the Spark data source imports pyspark (not installed on 3.9)
        if info.name.startswith("jetstream_sync.otel") and (
            importlib.util.find_spec("opentelemetry") is None
        ):
            continue  # the otel extra's package imports opentelemetry (not in test-core)
        mods.append(importlib.import_module(info.name))
    return mods


def test_every_annotation_evaluates_on_this_python() -> None:
    bad = []
    checked = 0
    for mod in _modules():
        for obj in vars(mod).values():
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            if getattr(obj, "__module__", None) != getattr(mod, "__name__", None):
                continue
            targets = [obj]
            if inspect.isclass(obj):
                targets += [v for v in vars(obj).values() if inspect.isfunction(v)]
            for target in targets:
                checked += 1
                try:
                    typing.get_type_hints(target)
                except NameError:
                    pass  # a name imported under TYPE_CHECKING only
                except TypeError as exc:
                    bad.append(f"{mod.__name__}.{target.__qualname__}: {exc}")  # type: ignore[attr-defined]
    assert checked > 500
    assert bad == [], "write Optional[X] / List[X] (3.9 evaluates no X | None):\n" + "\n".join(bad)
