"""The package's layers import one way (STYLE.md): a static check of every module's imports."""

import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "haystack_mvr"

# layer -> top-level packages (and haystack_mvr layers) it must never import
FORBIDDEN = {
    "modeling": {
        "haystack",
        "haystack_integrations",
        "faiss",
        "haystack_mvr.training",
        "haystack_mvr.evaluation",
        "haystack_mvr.components",
        "haystack_mvr.document_stores",
        "haystack_mvr.cli",
    },
    "datasets": {"torch", "transformers", "haystack", "faiss", "haystack_mvr.modeling"},
    "document_stores": {
        "torch",
        "transformers",
        "haystack_mvr.modeling",
        "haystack_mvr.training",
        "haystack_mvr.components",
        "haystack_mvr.cli",
    },
    # backend-neutral: a store passes its index's reader and writer in as callbacks
    "document_stores/versioned_folder": {
        "faiss",
        "qdrant_client",
        "torch",
        "haystack_mvr.document_stores.faiss",
        "haystack_mvr.document_stores.qdrant",
        "haystack_mvr.modeling",
    },
    "training": {"haystack", "haystack_mvr.components", "haystack_mvr.document_stores", "haystack_mvr.cli"},
    "evaluation": {"haystack_mvr.training", "haystack_mvr.cli"},
    "components": {"haystack_mvr.training", "haystack_mvr.cli"},
    # the readers' wing: training and the components both build on it
    "readers": {
        "haystack_mvr.training",
        "haystack_mvr.cli",
        "haystack_mvr.components",
        "haystack_mvr.document_stores",
        "haystack_mvr.evaluation",
    },
    # reader training runs on GPU machines without haystack; the wing's components are not training's to import
    "readers/training": {
        "haystack",
        "haystack_integrations",
        "sentence_transformers",
        "haystack_mvr.readers.generative_reader",
        "haystack_mvr.readers.generative_pipeline",
        "haystack_mvr.readers.fusion_in_decoder_reader",
    },
}

# the wing's modules that training and the components share: never haystack
READERS_WITHOUT_HAYSTACK = (
    "readers/base_model.py",
    "readers/generative_prompt.py",
    "readers/generative_model.py",
    "readers/fusion_in_decoder_model.py",
    "readers/shipped.py",
    "token_budget.py",
)


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _violates(name: str, forbidden: set[str]) -> bool:
    return any(name == f or name.startswith(f + ".") for f in forbidden)


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_point_one_way(layer):
    files = sorted((PACKAGE / layer).rglob("*.py"))
    if not files:
        pytest.skip(f"no modules in {layer} yet")
    bad = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in files
        for name in _imports(path)
        if _violates(name, FORBIDDEN[layer])
    }
    assert not bad, f"{layer} imports what it must not: {sorted(bad)}"


@pytest.mark.parametrize("module", READERS_WITHOUT_HAYSTACK)
def test_the_readers_shared_modules_never_import_haystack(module):
    imported = _imports(PACKAGE / module)
    assert not any(_violates(n, {"haystack", "haystack_integrations", "haystack_mvr.components"}) for n in imported)


def test_each_store_backend_stands_alone():
    """The FAISS and Qdrant stores share only the modules beside them (``document_stores/*.py``), which import
    neither backend."""
    stores = PACKAGE / "document_stores"
    backends = {"faiss": "haystack_mvr.document_stores.qdrant", "qdrant": "haystack_mvr.document_stores.faiss"}
    bad = [
        f"{path.relative_to(PACKAGE)}: {name}"
        for backend, other in backends.items()
        for path in (stores / backend).rglob("*.py")
        for name in _imports(path)
        if _violates(name, {other})
    ]
    shared = [path for path in stores.glob("*.py") if path.name != "__init__.py"]
    bad += [
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in shared
        for name in _imports(path)
        if _violates(name, set(backends.values()))
    ]
    assert shared and not bad, bad


def test_query_path_never_imports_training():
    for layer in ("components", "document_stores", "modeling"):
        for path in (PACKAGE / layer).rglob("*.py"):
            assert not any(_violates(n, {"haystack_mvr.training"}) for n in _imports(path)), path


def _fresh_python(code: str) -> str:
    """Run ``code`` in a new interpreter (nothing imported yet, no allowlist in the environment); its stdout."""
    env = {k: v for k, v in os.environ.items() if k != "HAYSTACK_DESERIALIZATION_ALLOWLIST"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip()


def test_importing_modeling_leaves_haystack_out():
    code = "import sys, haystack_mvr.modeling, haystack_mvr.modeling.loading\nprint('haystack' in sys.modules)"
    assert _fresh_python(code) == "False"


def test_the_sentence_transformers_modules_leave_haystack_out():
    pytest.importorskip("sentence_transformers", minversion="6")
    code = (
        "import sys, haystack_mvr.modeling.encoder_builders, haystack_mvr.modeling.encoder_inspection\n"
        "import haystack_mvr.modeling.st_encoder\n"
        "print('haystack' in sys.modules)"
    )
    assert _fresh_python(code) == "False"


def test_modeling_does_not_import_sentence_transformers_eagerly():
    """sentence-transformers is optional: ``haystack_mvr.modeling`` leaves it to the modules that build on it."""
    code = "import sys, haystack_mvr.modeling\nprint('sentence_transformers' in sys.modules)"
    assert _fresh_python(code) == "False"


@pytest.mark.parametrize("package", ["haystack_mvr.components", "haystack_mvr.document_stores"])
def test_pipeline_yaml_loads_after_importing_a_haystack_facing_package(package):
    code = (
        f"import {package}\n"
        "from haystack import Pipeline\n"
        "from haystack_mvr.components.embedders import MultiViewTextEmbedder\n"
        "p = Pipeline()\n"
        "p.add_component('embedder', MultiViewTextEmbedder(model='some/model', token=None))\n"
        "again = Pipeline.loads(p.dumps())\n"
        "print(type(again.get_component('embedder')).__name__)\n"
    )
    assert _fresh_python(code) == "MultiViewTextEmbedder"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_imports(path: Path, modules: set[str]) -> set[str]:
    """The package's modules ``path`` imports, at module level or inside functions (an import on first use is a
    dependency all the same); ``TYPE_CHECKING`` blocks left out. ``from package import module`` names the module."""
    names: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(sub)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for stmt in node.body
        for sub in ast.walk(stmt)
    }
    for sub in ast.walk(tree):
        if id(sub) in typing_only:
            continue
        if isinstance(sub, ast.Import):
            names.update(alias.name for alias in sub.names)
        elif isinstance(sub, ast.ImportFrom) and sub.module and sub.level == 0:
            inner = {f"{sub.module}.{alias.name}" for alias in sub.names} & modules
            names.update(inner or {sub.module})
    return names & modules


def test_no_import_cycles():
    """Every module can be read without the ones that import it (persistence.py once imported the FAISS store;
    config.py and loading.py imported each other through an import inside a function)."""
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = {name: _module_imports(path, set(paths)) - {name} for name, path in paths.items()}
    cycles = []
    for start in graph:
        stack = [(start, [start])]
        while stack:
            name, chain = stack.pop()
            for imported in graph[name]:
                if imported == start:
                    cycles.append(" -> ".join([*chain, start]))
                elif imported not in chain and imported > start:  # each cycle once, from its smallest module
                    stack.append((imported, [*chain, imported]))
    assert not cycles, cycles


# The package's folders from the bottom up. A folder imports only folders of the layers below it, never one of its
# own layer or above; every folder may import the floor: the package's top-level modules (views, maxsim, validation,
# token_budget, ...), which import no folder. Imports inside functions count (an import on first use is a
# dependency all the same).
LAYERS = (
    ("datasets", "document_stores", "modeling"),
    ("readers",),
    ("components", "testing"),
    ("evaluation",),
    ("training",),
    ("cli",),
)
FLOOR = "the floor"


def _folder(module: str) -> str:
    """The folder of the package a dotted module name lies in (``FLOOR`` for a top-level module)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (PACKAGE / parts[1]).is_dir() else FLOOR


def _upward_imports(layers=LAYERS) -> list[str]:
    rank = {folder: i for i, layer in enumerate(layers, start=1) for folder in layer} | {FLOOR: 0}
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    bad = []
    for name, path in sorted(paths.items()):
        here = _folder(name)
        for imported in sorted(_module_imports(path, set(paths))):
            there = _folder(imported)
            if there != here and rank[there] >= rank[here]:
                bad.append(f"{path.relative_to(PACKAGE.parent)} ({here}) imports {imported} ({there})")
    return bad


def test_every_folder_has_a_layer():
    folders = {path.name for path in PACKAGE.iterdir() if path.is_dir() and any(path.rglob("*.py"))}
    assert folders == {folder for layer in LAYERS for folder in layer}


def test_folders_import_downwards_only():
    """``modeling`` once imported ``readers`` (re-exports of the readers' old paths) while ``readers`` imports
    ``modeling``: no folder imports one of its own layer or above."""
    assert not _upward_imports()


def test_the_layer_check_finds_an_upward_import():
    """With ``readers`` put below ``modeling`` the check names the wing's imports of modeling."""
    swapped = (("datasets", "document_stores", "readers"), ("modeling",), *LAYERS[2:])
    assert any("haystack_mvr/readers/" in line and "(modeling)" in line for line in _upward_imports(swapped))


def _is_re_export(path: Path) -> bool:
    """Whether a module only hands on names of other modules of the package: it imports from ``haystack_mvr`` and
    defines no function or class of its own, whatever else it does with the names (binds them to other names, lists
    them in ``__all__``, registers them somewhere)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    defines = any(isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) for node in tree.body)
    imported = {
        name
        for node in ast.walk(tree)
        for name in (
            [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and node.level == 0
            else []
        )
    }
    return not defines and any(name == "haystack_mvr" or name.startswith("haystack_mvr.") for name in imported)


def test_no_module_is_a_re_export_of_others():
    """One door per room: a module that only hands on names of other modules is a second path to them. A package's
    ``__init__`` is the public door of its folder and may gather its names; old paths that saved artifacts name are
    kept by ``haystack_mvr/moved_paths.py``, never by a module of their own."""
    shims = {
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py" and _is_re_export(path)
    }
    assert not shims, sorted(shims)


def test_the_re_export_check_finds_one(tmp_path):
    shim = tmp_path / "shim.py"
    shim.write_text('"""Moved."""\n\nfrom haystack_mvr.a import C, d\n\nold_d = d\n__all__ = ["C", "d", "old_d"]\n')
    registering = tmp_path / "registering.py"
    registering.write_text("from haystack import component\nfrom haystack_mvr.a import C\n\nfor old in OLD:\n"
                           "    component.registry.setdefault(old, C)\n")  # fmt: skip
    room = tmp_path / "room.py"
    room.write_text("from haystack_mvr.a import C\n\n\ndef f():\n    return C\n")
    constants = tmp_path / "constants.py"
    constants.write_text('"""Constants."""\n\nimport re\n\nWORD = re.compile("\\\\w+")\n')
    assert _is_re_export(shim) and _is_re_export(registering)
    assert not _is_re_export(room) and not _is_re_export(constants)


def test_a_class_or_function_is_exported_by_one_package_at_most():
    """Beside the module it is defined in, a public class or function has one package door (its folder's
    ``__init__``) under one name, not a second one in a parent or sibling package or under another name."""
    pytest.importorskip("faiss")
    pytest.importorskip("qdrant_client")
    doors: dict[str, set[str]] = {}
    for init in sorted(PACKAGE.rglob("__init__.py")):
        package = importlib.import_module(_module_name(init))
        for name in getattr(package, "__all__", ()):
            value = getattr(package, name)
            if callable(value) and getattr(value, "__module__", "").startswith("haystack_mvr."):
                doors.setdefault(f"{value.__module__}.{value.__qualname__}", set()).add(f"{package.__name__}.{name}")
    second_doors = {path: sorted(names) for path, names in doors.items() if len(names) > 1}
    assert not second_doors, second_doors


def test_the_test_folders_mirror_the_package():
    """A folder of tests is named after the folder of the package it tests (``tests/readers/training`` tests
    ``haystack_mvr/readers/training``), or after the repository's ``benchmarks`` and ``examples``."""
    tests = Path(__file__).resolve().parent
    folders = {
        str(path.relative_to(tests)) for path in tests.rglob("*") if path.is_dir() and any(path.glob("test_*.py"))
    }
    outside = {folder for folder in folders if folder.split("/")[0] not in {"benchmarks", "examples"}}
    assert all((PACKAGE / folder).is_dir() for folder in outside), sorted(outside)


def _module_path(module: str) -> Path | None:
    path = PACKAGE.parent / Path(*module.split("."))
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def _top_level_names(path: Path) -> tuple[set[str], set[str]]:
    """``(defined, imported)``: the names a module binds at its top level itself, and those it imports from the
    package."""
    defined: set[str] = set()
    imported: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        for sub in [node, *(ast.walk(node) if isinstance(node, ast.If | ast.Try) else ())]:
            if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                defined.add(sub.name)
            elif isinstance(sub, ast.Assign | ast.AnnAssign):
                targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                defined.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            elif isinstance(sub, ast.ImportFrom) and (sub.module or "").startswith("haystack_mvr"):
                imported.update(alias.asname or alias.name for alias in sub.names)
    return defined - {"__all__"}, imported


def test_the_package_imports_each_name_from_the_module_that_defines_it():
    """``from haystack_mvr.x.y import name`` finds ``name`` defined in ``x/y.py``, or ``x.y`` is a package whose
    ``__init__`` is its folder's door: no name is taken from a module that only imported it."""
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (
                isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("haystack_mvr")
            ):
                continue
            source = _module_path(node.module)
            assert source is not None, f"{path.relative_to(PACKAGE)} imports {node.module}, which does not exist"
            if source.name == "__init__.py":
                continue
            defined, _ = _top_level_names(source)
            found.update(
                f"{path.relative_to(PACKAGE)}: {node.module}.{alias.name}"
                for alias in node.names
                if alias.name not in defined and _module_path(f"{node.module}.{alias.name}") is None
            )
    # faiss_import's ``faiss`` is the faiss module itself, imported once behind its checks
    stray = sorted(line for line in found if not line.endswith("faiss_import.faiss"))
    assert not stray, stray


def test_a_module_exports_only_the_names_it_defines():
    """A module's ``__all__`` lists what it defines; a name it imports has its own module (a package's ``__init__``
    gathers its folder's names)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__init__.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        exported = next(
            (
                set(ast.literal_eval(node.value))
                for node in tree.body
                if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets)
            ),
            set(),
        )
        _, imported = _top_level_names(path)
        if exported & imported:
            found[str(path.relative_to(PACKAGE))] = exported & imported
    assert not found, found


def test_documents_are_built_by_haystack_not_by_object_new():
    """A ``Document`` made with ``object.__new__`` and a swapped ``__dict__`` skips Haystack's ``__init__``: a field
    Haystack adds later would be missing from it. Every Document comes from its constructor, ``from_dict`` or
    ``dataclasses.replace``."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            named = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "object"
            if named and node.attr == "__new__":
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
            if isinstance(node, ast.Constant) and node.value == "__dict__":  # a swapped instance dict
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert not offenders, f"object.__new__ or a swapped __dict__ in {offenders}"


def test_no_room_is_over_700_lines():
    """A module that grows past 700 lines holds more than one job: split it along its jobs."""
    sizes = {
        str(p.relative_to(PACKAGE.parent)): len(p.read_text(encoding="utf-8").splitlines())
        for p in PACKAGE.rglob("*.py")
    }
    assert not {path: n for path, n in sizes.items() if n > 700}
