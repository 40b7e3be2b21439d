"""The package's layers import one way (STYLE.md): a static check of every module's imports."""

import ast
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
    shared = [
        path for path in stores.glob("*.py") if path.name not in {"__init__.py", "faiss_multi_view_document_store.py"}
    ]
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
        "import sys, haystack_mvr.modeling.st_modules, haystack_mvr.modeling.st_encoder\n"
        "print('haystack' in sys.modules)"
    )
    assert _fresh_python(code) == "False"


def test_modeling_does_not_import_sentence_transformers_eagerly():
    """sentence-transformers is optional: ``haystack_mvr.modeling`` imports it only in ``st_modules``/``st_encoder``."""
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
