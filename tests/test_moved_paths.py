"""The one table of moved paths: every old path saved artifacts carry loads its class with a warning naming the new
path, pipelines saved under old types load, and nothing else answers to an old path."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from haystack_mvr import moved_paths
from haystack_mvr.moved_paths import MOVED

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "haystack_mvr"
ROWS = sorted(MOVED.items())
FID_OLD = "haystack_mvr.components.readers.fusion_in_decoder_reader.FusionInDecoderReader"
FID_NEW = "haystack_mvr.readers.fusion_in_decoder_reader.FusionInDecoderReader"
FAISS_OLD = "haystack_mvr.document_stores.faiss_multi_view_document_store.FaissMultiViewDocumentStore"
FAISS_NEW = "haystack_mvr.document_stores.faiss.document_store.FaissMultiViewDocumentStore"


def _needs(new: str) -> None:
    if ".document_stores.faiss." in new:
        pytest.importorskip("faiss")
    if ".modeling." in new:
        pytest.importorskip("sentence_transformers", minversion="6")


@pytest.mark.parametrize(("old", "new"), ROWS, ids=[old.rpartition(".")[2] for old, _ in ROWS])
def test_every_row_loads_its_class_with_a_warning_naming_the_new_path(old, new):
    _needs(new)
    old_module, _, name = old.rpartition(".")
    module = importlib.import_module(old_module)
    with pytest.warns(FutureWarning, match=re.escape(f"{old} is an old path of {new},")):
        value = getattr(module, name)
    assert f"{value.__module__}.{value.__qualname__}" == new  # the new path is where the class is defined
    assert moved_paths.moved_to(old) == new


@pytest.mark.parametrize(("old", "new"), ROWS, ids=[old.rpartition(".")[2] for old, _ in ROWS])
def test_an_old_path_names_no_module_of_the_package_and_only_its_rows(old, new):
    """The table stands in for modules that are gone, and keeps only the names saved artifacts carry."""
    _needs(new)
    old_module = old.rpartition(".")[0]
    relative = Path(*old_module.split(".")[1:])
    assert not (PACKAGE / relative).with_suffix(".py").exists() and not (PACKAGE / relative).is_dir()
    module = importlib.import_module(old_module)
    kept = {path.rpartition(".")[2] for path in MOVED if path.rpartition(".")[0] == old_module}
    assert set(module.__all__) == set(dir(module)) == kept
    with pytest.raises(AttributeError, match="an old path that keeps only"):
        _ = module.anything_else


@pytest.mark.parametrize(
    "gone",
    [
        "haystack_mvr.training.readers",
        "haystack_mvr.training.readers.generative",
        "haystack_mvr.modeling.fusion_in_decoder",
        "haystack_mvr.modeling.generative_prompt",
        "haystack_mvr.modeling.token_budget",
        "haystack_mvr.components.readers.generative",
    ],
)
def test_module_paths_that_only_code_imported_are_gone(gone):
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(gone)


def test_upgraded_rewrites_only_an_old_type():
    data = {"type": FID_OLD, "init_parameters": {"top_k": 2}}
    with pytest.warns(FutureWarning, match=re.escape(FID_NEW)):
        assert moved_paths.upgraded(data) == {"type": FID_NEW, "init_parameters": {"top_k": 2}}
    assert data["type"] == FID_OLD  # the caller's dict is left as it is
    current = {"type": FID_NEW, "init_parameters": {}}
    assert moved_paths.upgraded(current) is current


def test_the_finder_is_installed_once():
    moved_paths.install()
    finders = [f for f in sys.meta_path if f is moved_paths._Finder]
    assert len(finders) == 1


def _fid_pipeline_yaml() -> str:
    from haystack import Pipeline
    from haystack.utils import ComponentDevice

    from haystack_mvr.components.readers import FusionInDecoderReader

    pipeline = Pipeline()
    reader = FusionInDecoderReader(model="google/flan-t5-base", device=ComponentDevice.from_str("cpu"), top_k=2)
    pipeline.add_component("reader", reader)
    return pipeline.dumps()


def test_a_pipeline_saved_under_the_fid_reader_s_old_type_loads():
    from haystack import Pipeline

    from haystack_mvr.components.readers import FusionInDecoderReader

    old = _fid_pipeline_yaml().replace(FID_NEW, FID_OLD)
    assert f"type: {FID_OLD}" in old
    with pytest.warns(FutureWarning, match=re.escape(FID_NEW)):
        reader = Pipeline.loads(old).get_component("reader")
    assert isinstance(reader, FusionInDecoderReader) and reader.top_k == 2 and reader.model == "google/flan-t5-base"
    assert reader.to_dict()["type"] == FID_NEW  # written back under the new path


def test_pipelines_saved_under_old_types_load_in_a_fresh_interpreter():
    """Nothing of haystack-mvr imported but the package: Haystack imports each old type's module to resolve it (the
    FiD reader at the top level, the FAISS store inside a retriever's parameters)."""
    pytest.importorskip("faiss")
    from haystack import Pipeline

    from haystack_mvr.components.retrievers import MultiViewRetriever
    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore

    pipeline = Pipeline()
    pipeline.add_component("retriever", MultiViewRetriever(document_store=FaissMultiViewDocumentStore(embedding_dim=2)))
    retriever_yaml = pipeline.dumps()
    assert FAISS_NEW in retriever_yaml
    code = (
        "import sys, warnings\n"
        "warnings.simplefilter('always')\n"
        "import haystack_mvr\n"
        "from haystack import Pipeline\n"
        "for text in sys.stdin.read().split('\\n---\\n'):\n"
        "    loaded = Pipeline.loads(text).to_dict()['components']\n"
        "    for name, data in loaded.items():\n"
        "        store = data['init_parameters'].get('document_store')\n"
        "        print(name, data['type'], store['type'] if store else '-')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "HAYSTACK_DESERIALIZATION_ALLOWLIST"}
    result = subprocess.run(
        [sys.executable, "-c", code],
        input=_fid_pipeline_yaml().replace(FID_NEW, FID_OLD) + "\n---\n" + retriever_yaml.replace(FAISS_NEW, FAISS_OLD),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=REPO,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    retriever_type = "haystack_mvr.components.retrievers.multi_view_retriever.MultiViewRetriever"
    assert result.stdout.split("\n")[:2] == [f"reader {FID_NEW} -", f"retriever {retriever_type} {FAISS_NEW}"]
    assert f"{FID_OLD} is an old path of {FID_NEW}" in result.stderr
    assert f"{FAISS_OLD} is an old path of {FAISS_NEW}" in result.stderr
