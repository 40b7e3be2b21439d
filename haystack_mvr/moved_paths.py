"""
The one table of moved paths: the old class paths that saved artifacts carry, and how they keep loading.

What haystack-mvr saves names classes by their dotted path: a Haystack pipeline's YAML gives every component and
document store as ``type: <module>.<Class>``, and a sentence-transformers checkpoint's ``modules.json`` (and a
``Router``'s ``router_config.json``) gives every module that way. A pipeline or checkpoint saved before a class moved
still names its old path, so :data:`MOVED` maps each old path that such files carry to the class's path today. It
holds nothing else: module paths that only code imported went when their classes moved (the project is 0.x; the
CHANGELOG lists them), and the package imports only the modules its names live in.

``import haystack_mvr`` calls :func:`install`, which puts a finder first on ``sys.meta_path``. Importing a module
that is the old home of rows of the table (it no longer exists as a file) gives a stand-in whose attributes are those
rows: reading one (``from ... import``, Haystack's ``import_class_by_name``, sentence-transformers'
``import_from_string``) returns the class from its new home and warns with a ``FutureWarning`` naming the new path.
The warning is a ``FutureWarning``, not a ``DeprecationWarning``, because whoever sees it holds a saved file rather
than code, and sentence-transformers silences ``DeprecationWarning`` while it imports a checkpoint's classes. Any
other attribute of the stand-in is an ``AttributeError`` that lists the names it keeps.

A Haystack component's old type is also entered in Haystack's component registry when its stand-in is imported, as
``Pipeline.loads`` looks component types up there; the class's ``from_dict`` passes its data through
:func:`upgraded`, which replaces an old ``type`` by the new one (with the same warning), since Haystack's
``default_from_dict`` accepts only the class's own path. Saving again writes the new path, and the warning stops.
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings
from importlib.machinery import ModuleSpec
from typing import Any

__all__ = ["MOVED", "install", "moved_to", "upgraded"]

# old dotted path -> the class's dotted path today
MOVED: dict[str, str] = {
    # pipelines saved before the readers moved into their own folder (haystack_mvr/readers)
    "haystack_mvr.components.readers.fusion_in_decoder_reader.FusionInDecoderReader": (
        "haystack_mvr.readers.fusion_in_decoder_reader.FusionInDecoderReader"
    ),
    # pipelines saved before the FAISS store moved into haystack_mvr/document_stores/faiss
    "haystack_mvr.document_stores.faiss_multi_view_document_store.FaissMultiViewDocumentStore": (
        "haystack_mvr.document_stores.faiss.document_store.FaissMultiViewDocumentStore"
    ),
    # checkpoints saved while the sentence-transformers modules were named by haystack_mvr.modeling.st_modules
    "haystack_mvr.modeling.st_modules.SnippetTransformer": (
        "haystack_mvr.modeling.snippet_transformer.SnippetTransformer"
    ),
    "haystack_mvr.modeling.st_modules.SnippetViews": "haystack_mvr.modeling.snippet_views.SnippetViews",
    "haystack_mvr.modeling.st_modules.ViewerPooling": "haystack_mvr.modeling.viewer_pooling.ViewerPooling",
    "haystack_mvr.modeling.st_modules.ViewerTransformer": "haystack_mvr.modeling.viewer_transformer.ViewerTransformer",
}


def _rows_by_module() -> dict[str, dict[str, str]]:
    rows: dict[str, dict[str, str]] = {}
    for old, new in MOVED.items():
        module, _, name = old.rpartition(".")
        rows.setdefault(module, {})[name] = new
    return rows


# old module -> {old name in it: new dotted path}
_OLD_MODULES = _rows_by_module()


def moved_to(old: str) -> str | None:
    """The dotted path today of the class saved artifacts name ``old``; ``None`` when ``old`` has not moved."""
    return MOVED.get(old)


def _warn(old: str, new: str, stacklevel: int) -> None:
    warnings.warn(
        f"{old} is an old path of {new}, kept so that what was saved with it loads; save it again to write the new "
        "path.",
        FutureWarning,
        stacklevel=stacklevel + 1,
    )


def _resolve(path: str) -> Any:
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def upgraded(data: dict[str, Any]) -> dict[str, Any]:
    """
    ``data`` (a ``to_dict`` output) with an old ``type`` replaced by the class's path today, warning with the new
    path; ``data`` itself when its ``type`` has not moved. For the ``from_dict`` of a class that has moved.
    """
    old = data.get("type")
    new = MOVED.get(old) if isinstance(old, str) else None
    if new is None:
        return data
    _warn(old, new, stacklevel=2)
    return {**data, "type": new}


def _register_components(old_module: str, rows: dict[str, str]) -> None:
    """Enter each row that is a Haystack component under its old type too: ``Pipeline.loads`` imports a type's
    module, then looks the type up in Haystack's registry, never in the module."""
    haystack_component = sys.modules.get("haystack.core.component.component")
    registry = getattr(getattr(haystack_component, "component", None), "registry", None)
    if registry is None:  # haystack is not loaded, so no row's class is a component
        return
    for name, new in rows.items():
        value = registry.get(new)
        if value is not None:
            registry.setdefault(f"{old_module}.{name}", value)


class _Loader:
    """Turns the module object the import system made for an old module path into that path's stand-in."""

    @staticmethod
    def create_module(spec: ModuleSpec) -> None:
        return None  # the import system's default module object

    @staticmethod
    def exec_module(module: types.ModuleType) -> None:
        old_module = module.__name__
        rows = _OLD_MODULES[old_module]
        module.__doc__ = f"An old module path: it keeps the names saved artifacts carry ({', '.join(sorted(rows))})."
        module.__all__ = sorted(rows)  # type: ignore[attr-defined]

        def __getattr__(name: str) -> Any:
            new = rows.get(name)
            if new is None:
                msg = f"module {old_module!r} has no attribute {name!r}"
                if not name.startswith("__"):
                    msg += f": it is an old path that keeps only {', '.join(sorted(rows))}"
                raise AttributeError(msg)
            _warn(f"{old_module}.{name}", new, stacklevel=2)
            return _resolve(new)

        module.__getattr__ = __getattr__  # type: ignore[method-assign]
        module.__dir__ = lambda: sorted(rows)  # type: ignore[method-assign]
        for new in rows.values():
            importlib.import_module(new.rpartition(".")[0])  # its class is registered with Haystack on import
        _register_components(old_module, rows)


class _Finder:
    """Finds the old module paths of :data:`MOVED` (first on ``sys.meta_path``, so a stale file of one never wins)."""

    @staticmethod
    def find_spec(fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if fullname not in _OLD_MODULES:
            return None
        return ModuleSpec(fullname, _Loader, origin=__name__)


def install() -> None:
    """Put the finder of the old module paths first on ``sys.meta_path`` (once; ``import haystack_mvr`` calls it)."""
    if _Finder not in sys.meta_path:
        sys.meta_path.insert(0, _Finder)  # type: ignore[arg-type]
