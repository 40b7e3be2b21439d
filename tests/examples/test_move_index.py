"""examples/move_index.py moves an index FAISS -> Qdrant folder -> FAISS and the copies answer as the original."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from haystack import Document

pytest.importorskip("qdrant_client")

from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.views import MATCHED_SPAN_KEY, attach_views

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def move_index(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import move_index

    return move_index


def test_help_is_fast_and_imports_nothing_heavy():
    probe = (
        "import runpy, sys\n"
        f"sys.argv = ['move_index.py', '--help']\n"
        "try:\n"
        f"    runpy.run_path({str(EXAMPLES / 'move_index.py')!r}, run_name='__main__')\n"
        "except SystemExit as e:\n    assert e.code in (0, None), e.code\n"
        "heavy = ('torch', 'transformers', 'haystack', 'qdrant_client', 'faiss', 'numpy')\n"
        "print('IMPORTED', sorted(m for m in heavy if m in sys.modules))\n"
    )
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert time.perf_counter() - started < 2.0
    assert "usage:" in result.stdout and "qdrant-path:FOLDER" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "IMPORTED []"


def test_faiss_to_qdrant_folder_to_faiss(tmp_path, move_index, capsys):
    rng = np.random.default_rng(0)
    docs = []
    for i in range(30):
        content = f"First sentence {i}. Second sentence {i}."
        spans = [None, (0, content.index(".") + 1), (content.index(".") + 2, len(content))]
        meta = {"lang": ["pl", "en"][i % 2], "i": i}
        docs.append(attach_views(Document(id=f"d{i}", content=content, meta=meta), rng.normal(size=(3, 16)), spans))
    original = FaissMultiViewDocumentStore(index_factory="Flat")
    original.write_documents(docs)
    original.save(tmp_path / "faiss")

    common = ["--index", "moved", "--batch-size", "7", "--verify", "5"]
    qdrant, back = f"qdrant-path:{tmp_path / 'qdrant'}", f"faiss:{tmp_path / 'back'}"
    assert move_index.main(["--from", f"faiss:{tmp_path / 'faiss'}", "--to", qdrant, *common]) == 0
    assert move_index.main(["--from", qdrant, "--to", back, *common]) == 0
    out = capsys.readouterr().out
    assert (
        out.count("Copied 30 documents") == 2
        and out.count("20 queries (vectors and 4-vector MaxSim queries, 2 filters): 0 differ.") == 2
    )

    reloaded = FaissMultiViewDocumentStore(index_path=str(tmp_path / "back"))
    query = rng.normal(size=16)
    for filters in (None, {"field": "meta.lang", "operator": "==", "value": "en"}):
        expected = original.search(query, top_k=5, filters=filters)
        got = reloaded.search(query, top_k=5, filters=filters)
        assert [(h.id, h.meta[MATCHED_SPAN_KEY]) for h in got] == [(h.id, h.meta[MATCHED_SPAN_KEY]) for h in expected]
        np.testing.assert_allclose([h.score for h in got], [h.score for h in expected], rtol=1e-6)

    with pytest.raises(SystemExit, match=r"already holds 30 documents: nothing was copied\. --overwrite"):
        move_index.main(["--from", f"faiss:{tmp_path / 'faiss'}", "--to", qdrant, "--index", "moved"])
    assert (
        move_index.main(["--from", f"faiss:{tmp_path / 'faiss'}", "--to", qdrant, "--index", "moved", "--overwrite"])
        == 0
    )


def test_bad_store_spec_is_a_usage_error(move_index, capsys):
    with pytest.raises(SystemExit):
        move_index.main(["--from", "faiss", "--to", "qdrant-path:x"])
    assert "faiss:FOLDER" in capsys.readouterr().err


def _saved(folder: Path, ids: list[str], dim: int = 8, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    store = FaissMultiViewDocumentStore(index_factory="Flat")
    store.write_documents([attach_views(Document(id=i, content=f"text {i}"), rng.normal(size=(2, dim))) for i in ids])
    store.save(folder)
    return folder


def test_a_target_that_holds_other_documents_is_refused_and_kept(tmp_path, move_index):
    """It was merged, then --verify reported "Differ" (issue 48): one line with the advice, nothing lost."""
    source, target = _saved(tmp_path / "a", ["a1", "a2"]), _saved(tmp_path / "b", ["b1"])
    args = ["--from", f"faiss:{source}", "--to", f"faiss:{target}"]
    with pytest.raises(SystemExit, match=r"already holds 1 documents: nothing was copied\. --overwrite adds"):
        move_index.main(args)
    with pytest.raises(SystemExit, match=r"--verify compares the target with the source: .* held 1 documents"):
        move_index.main([*args, "--overwrite", "--verify", "3"])
    assert FaissMultiViewDocumentStore(index_path=str(target)).count_documents() == 1
    assert move_index.main([*args, "--overwrite"]) == 0  # asked for: added beside what it held
    assert FaissMultiViewDocumentStore(index_path=str(target)).count_documents() == 3


def test_another_dimension_is_one_line_and_the_target_is_kept(tmp_path, move_index):
    source, target = _saved(tmp_path / "a", ["x"], dim=8), _saved(tmp_path / "b", ["x", "y"], dim=4)
    with pytest.raises(SystemExit) as error:
        move_index.main(["--from", f"faiss:{source}", "--to", f"faiss:{target}", "--overwrite"])
    message = str(error.value.code)
    assert "\n" not in message and "8-dimensional" in message and "What the target held before is kept" in message
    kept = FaissMultiViewDocumentStore(index_path=str(target))
    assert kept.count_documents() == 2


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (["--batch-size", "0"], "--batch-size: '0': a positive integer"),
        (["--verify", "-1"], "--verify: '-1': 0 or a positive integer"),
        (["--filter", '{"field": "meta.k", "operator": "~", "value": 1}'], "unknown operator '~'"),
        (["--filter", "{not json"], "--filter: '{not json'"),
    ],
)
def test_bad_numbers_and_filters_are_usage_errors(tmp_path, move_index, capsys, flags, reason):
    source = _saved(tmp_path / "a", ["a1"])
    with pytest.raises(SystemExit) as error:
        move_index.main(["--from", f"faiss:{source}", "--to", f"faiss:{tmp_path / 'b'}", *flags])
    assert error.value.code == 2 and reason in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_the_source_named_with_a_trailing_slash_is_the_same_store(tmp_path, move_index):
    source = _saved(tmp_path / "a", ["a1"])
    for other in (f"{source}/", f"{tmp_path}/./a", f"{tmp_path}/b/../a"):
        with pytest.raises(SystemExit, match="name the same store"):
            move_index.main(["--from", f"faiss:{source}", "--to", f"faiss:{other}"])
    assert move_index.same_store(("qdrant-url", "http://h:6333/"), ("qdrant-url", "http://h:6333"))


def test_a_late_interaction_index_moves_faiss_to_qdrant_and_back_verified(tmp_path, move_index, capsys, tiny_colbert):
    from haystack_mvr.components.embedders import MultiViewDocumentEmbedder

    texts = [f"Page {i}: the Vistula flows through Warsaw and Kraków, {i} bridges cross it." for i in range(12)]
    embedded = MultiViewDocumentEmbedder(model=str(tiny_colbert), progress_bar=False).run(
        [Document(id=f"p{i}", content=t, meta={"i": i}) for i, t in enumerate(texts)]
    )["documents"]
    original = FaissMultiViewDocumentStore(index_factory="Flat")
    original.write_documents(embedded)
    original.save(tmp_path / "faiss")
    qdrant, back = f"qdrant-path:{tmp_path / 'qdrant'}", f"faiss:{tmp_path / 'back'}"
    common = ["--index", "colbert", "--verify", "5"]
    assert move_index.main(["--from", f"faiss:{tmp_path / 'faiss'}", "--to", qdrant, *common]) == 0
    assert move_index.main(["--from", qdrant, "--to", back, *common]) == 0
    assert capsys.readouterr().out.count("MaxSim queries, 2 filters): 0 differ.") == 2
    reloaded = FaissMultiViewDocumentStore(index_path=str(tmp_path / "back"))
    assert reloaded.count_documents() == 12 and reloaded.encoder_config["mode"] == "late_interaction"
    query = np.random.default_rng(2).normal(size=(8, 16)).astype(np.float32)
    expected, got = original.search(query, top_k=5), reloaded.search(query, top_k=5)
    assert [h.id for h in got] == [h.id for h in expected]
    assert [h.meta["mvr_matched_spans"] for h in got] == [h.meta["mvr_matched_spans"] for h in expected]


def test_into_a_qdrant_collection_of_another_dimension_is_one_line_and_kept(tmp_path, move_index):
    """It ended in a CollectionMismatchError traceback: opening the target ran outside the one-line handling
    (issue 57)."""
    source, other = _saved(tmp_path / "a", ["x"], dim=8), _saved(tmp_path / "o", ["p", "q"], dim=4)
    qdrant = f"qdrant-path:{tmp_path / 'qdrant'}"
    assert move_index.main(["--from", f"faiss:{other}", "--to", qdrant, "--index", "moved"]) == 0
    for extra in ([], ["--overwrite"]):
        with pytest.raises(SystemExit) as error:
            move_index.main(["--from", f"faiss:{source}", "--to", qdrant, "--index", "moved", *extra])
        message = str(error.value.code)
        assert "\n" not in message and message.startswith(f"{qdrant}: "), message
        assert "What the target held before is kept" in message
    from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore

    kept = QdrantMultiViewDocumentStore(path=str(tmp_path / "qdrant"), index="moved")
    try:
        assert kept.count_documents() == 2
    finally:
        kept.close()


def test_a_resumed_copy_can_be_verified(tmp_path, move_index, capsys):
    """A copy that stopped midway, resumed with --overwrite, could no longer be --verify-ed at all (issue 57): what
    the target holds is all the source's, so the comparison is sound."""
    source = _saved(tmp_path / "a", [f"d{i}" for i in range(12)], dim=8)
    whole = FaissMultiViewDocumentStore(index_path=str(source))
    part = FaissMultiViewDocumentStore(index_factory="Flat")
    part.write_documents(whole.filter_documents({"field": "id", "operator": "in", "value": ["d0", "d1", "d2"]}))
    part.save(tmp_path / "b")  # what a copy that stopped after its first batch left
    args = ["--from", f"faiss:{source}", "--to", f"faiss:{tmp_path / 'b'}", "--overwrite", "--verify", "3"]
    assert move_index.main(args) == 0
    out = capsys.readouterr().out
    assert "Copied 12 documents" in out and "Verified: 12 documents in both stores." in out and "0 differ" in out
