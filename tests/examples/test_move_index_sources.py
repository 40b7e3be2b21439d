"""examples/move_index.py: the quickstart's cached index moves as it is, an empty source is an error that says what
was found, and --verify checks what it says it checks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from haystack import Document

pytest.importorskip("qdrant_client")

from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore
from haystack_mvr.views import attach_views

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def move_index(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import move_index

    return move_index


def documents(n: int = 12, seed: int = 0) -> list[Document]:
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n):
        content = f"First sentence {i}. Second sentence {i}."
        spans = [None, (0, content.index(".") + 1), (content.index(".") + 2, len(content))]
        meta = {"title": ["River", "Hills"][i % 2], "i": i}
        docs.append(attach_views(Document(id=f"d{i}", content=content, meta=meta), rng.normal(size=(3, 16)), spans))
    return docs


def quickstart_cache(folder: Path, n: int = 12) -> Path:
    """A folder laid out as examples/quickstart.py leaves runs/quickstart-index (saved_index: key + store/)."""
    from haystack_mvr.evaluation.saved_index import save_index

    store = FaissMultiViewDocumentStore(index_factory="Flat")
    store.write_documents(documents(n))
    key = {"built_from": "the tests"}
    save_index(store, folder, key)
    return folder


def test_the_quickstart_folder_moves_with_all_its_documents(tmp_path, move_index, capsys):
    cache = quickstart_cache(tmp_path / "quickstart-index")
    qdrant = f"qdrant-path:{tmp_path / 'qdrant'}"
    assert move_index.main(["--from", f"faiss:{cache}", "--to", qdrant, "--verify", "5"]) == 0
    out = capsys.readouterr().out
    assert f"{cache / 'store'}" in out  # says where it found the store
    assert "Copied 12 documents" in out
    assert "12 documents in both" in out and "0 differ" in out
    target = QdrantMultiViewDocumentStore(path=str(tmp_path / "qdrant"), index="haystack_mvr")
    assert target.count_documents() == 12
    target.close()


@pytest.mark.parametrize("layout", ["missing", "empty-folder", "other-files", "empty-store"])
def test_an_empty_source_is_an_error_naming_the_path_and_what_it_holds(tmp_path, move_index, layout):
    source = tmp_path / "source"
    if layout == "empty-folder":
        source.mkdir()
    elif layout == "other-files":
        source.mkdir()
        (source / "notes.txt").write_text("mine")
        (source / "sub").mkdir()
    elif layout == "empty-store":
        FaissMultiViewDocumentStore(index_factory="Flat").save(source)
    with pytest.raises(SystemExit) as exit_info:
        move_index.main(["--from", f"faiss:{source}", "--to", f"faiss:{tmp_path / 'target'}"])
    message = str(exit_info.value.code)
    assert exit_info.value.code not in (0, None) and str(source) in message
    expected = {
        "missing": "does not exist",
        "empty-folder": "is an empty folder",
        "other-files": "notes.txt, sub/",
        "empty-store": "holds no documents",
    }[layout]
    assert expected in message
    assert not (tmp_path / "target").exists()  # nothing was created


def test_an_empty_qdrant_source_names_the_collections_it_found(tmp_path, move_index):
    folder = tmp_path / "qdrant"
    other = QdrantMultiViewDocumentStore(path=str(folder), index="squad_mv")
    other.write_documents(documents(2))
    other.close()
    with pytest.raises(SystemExit) as exit_info:
        move_index.main(["--from", f"qdrant-path:{folder}", "--to", f"faiss:{tmp_path / 'target'}"])
    message = str(exit_info.value.code)
    assert str(folder) in message and "'haystack_mvr'" in message and "squad_mv" in message


def test_a_filter_that_matches_nothing_is_an_error(tmp_path, move_index):
    cache = quickstart_cache(tmp_path / "quickstart-index")
    nothing = json.dumps({"field": "meta.title", "operator": "==", "value": "Nowhere"})
    with pytest.raises(SystemExit) as exit_info:
        move_index.main(["--from", f"faiss:{cache}", "--to", f"faiss:{tmp_path / 't'}", "--filter", nothing])
    assert "no documents match --filter" in str(exit_info.value.code)


def test_verify_with_a_filter_compares_the_copied_documents(tmp_path, move_index, capsys):
    cache = quickstart_cache(tmp_path / "quickstart-index")
    river = json.dumps({"field": "meta.title", "operator": "==", "value": "River"})
    target = f"faiss:{tmp_path / 'river'}"
    assert move_index.main(["--from", f"faiss:{cache}", "--to", target, "--filter", river, "--verify", "4"]) == 0
    out = capsys.readouterr().out
    assert "Copied 6 documents" in out and "6 documents in both" in out and "0 differ" in out


def test_verify_reports_a_target_that_answers_otherwise(tmp_path, move_index, capsys):
    cache = quickstart_cache(tmp_path / "quickstart-index")
    held = FaissMultiViewDocumentStore(index_factory="Flat")
    extra = documents(3, seed=1)
    held.write_documents([Document(id=f"extra{i}", content=d.content, meta=d.meta) for i, d in enumerate(extra)])
    held.save(tmp_path / "target")
    args = ["--from", f"faiss:{cache}", "--to", f"faiss:{tmp_path / 'target'}", "--verify", "5"]
    with pytest.raises(SystemExit, match="already holds 3 documents: nothing was copied"):  # was: merged, "Differ"
        move_index.main(args)
    with pytest.raises(SystemExit, match="--verify compares the target with the source"):
        move_index.main([*args, "--overwrite"])
    assert FaissMultiViewDocumentStore(index_path=str(tmp_path / "target")).count_documents() == 3


def test_verify_reports_a_copy_that_differs(tmp_path, move_index, monkeypatch, capsys):
    cache = quickstart_cache(tmp_path / "quickstart-index")
    import haystack_mvr.document_stores as stores

    real = stores.copy_documents

    def lossy(source, target, **kwargs):  # a copy that lost a document (another writer deleted it, say)
        copied = real(source, target, **kwargs)
        target.delete_documents([next(iter(target.export_documents(batch_size=1)))[0].id])
        return copied

    monkeypatch.setattr(stores, "copy_documents", lossy)
    code = move_index.main(["--from", f"faiss:{cache}", "--to", f"faiss:{tmp_path / 'target'}", "--verify", "2"])
    assert code == 1 and "Differ: the target holds 11 documents, the source 12" in capsys.readouterr().out


def test_verify_compares_the_matched_views_too(tmp_path, move_index, monkeypatch, capsys):
    cache = quickstart_cache(tmp_path / "quickstart-index")
    real = FaissMultiViewDocumentStore.search_batch
    calls = []

    def shifted(self, queries, top_k=10, filters=None, return_embedding=False):
        hits = real(self, queries, top_k, filters, return_embedding)
        calls.append(self)
        if len(calls) % 2 == 0:  # the target's answers: same ids and scores, another matched view
            for row in hits:
                for hit in row:
                    hit.meta["mvr_matched_view"] = 99
        return hits

    monkeypatch.setattr(FaissMultiViewDocumentStore, "search_batch", shifted)
    code = move_index.main(["--from", f"faiss:{cache}", "--to", f"faiss:{tmp_path / 'target'}", "--verify", "3"])
    assert code == 1 and "differ" in capsys.readouterr().out


def test_a_saved_index_cache_is_no_target(tmp_path, move_index):
    cache = quickstart_cache(tmp_path / "quickstart-index")
    source = FaissMultiViewDocumentStore(index_factory="Flat")
    source.write_documents(documents(2, seed=3))
    source.save(tmp_path / "other")
    with pytest.raises(SystemExit) as exit_info:
        move_index.main(["--from", f"faiss:{tmp_path / 'other'}", "--to", f"faiss:{cache}"])
    assert "saved-index cache" in str(exit_info.value.code)


def test_the_readme_move_command_moves_what_the_quickstart_saved(tmp_path, move_index, tiny_backbone, capsys):
    """README "Moving an index between stores": --from faiss:runs/quickstart-index, as the quickstart leaves it."""
    import quickstart

    corpus = tmp_path / "corpus.jsonl"
    texts = ["The river flows north. Boats sail on it.", "The hills are green. Sheep graze there.", "A city."]
    corpus.write_text("".join(json.dumps({"id": f"p{i}", "title": "T", "text": t}) + "\n" for i, t in enumerate(texts)))
    index = tmp_path / "quickstart-index"
    quickstart.main(["--corpus", str(corpus), "--model", str(tiny_backbone), "--index-dir", str(index), "--no-answers"])
    capsys.readouterr()
    qdrant = f"qdrant-path:{tmp_path / 'qdrant-moved'}"
    assert move_index.main(["--from", f"faiss:{index}", "--to", qdrant, "--verify", "20"]) == 0
    out = capsys.readouterr().out
    assert "Copied 3 documents" in out and "3 documents in both" in out
    assert "Verified 80 queries (vectors and 4-vector MaxSim queries, 2 filters): 0 differ." in out
