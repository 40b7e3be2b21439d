"""Package names that load on first use (PEP 562), so importing a package does not import torch."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_names(
    package: str, modules: dict[str, str], namespace: dict[str, Any], exported: list[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """
    A package's ``__getattr__`` and ``__dir__``: ``name`` is imported from ``package.<modules[name]>`` on first use
    and kept in ``namespace`` (the package's ``globals()``), so later uses cost nothing.
    """

    def __getattr__(name: str) -> Any:
        if name not in modules:
            msg = f"module {package!r} has no attribute {name!r}"
            raise AttributeError(msg)
        value = getattr(importlib.import_module(f"{package}.{modules[name]}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exported))

    return __getattr__, __dir__
