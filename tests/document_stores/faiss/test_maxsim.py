"""Multi-vector (late-interaction) queries on the FAISS store: MaxSim against brute force, on every index type, under
random writes, deletes, overwrites and filters."""

from __future__ import annotations

import numpy as np
import pytest
from haystack import Document
from haystack.document_stores.types import DuplicatePolicy

from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.document_stores.faiss.view_index import ViewIndex
from tests.document_stores.faiss.test_contract import CONFIGS

DIM = 8
CASES = [(name, keep) for name, (_, _, keeps) in CONFIGS.items() for keep in keeps]


def brute_force(query: np.ndarray, corpus: dict[str, np.ndarray], allowed: set[str]) -> list[tuple[str, float]]:
    scores = [(doc_id, float((views @ query.T).max(axis=0).sum())) for doc_id, views in corpus.items()]
    return sorted(((i, s) for i, s in scores if i in allowed), key=lambda p: -p[1])


def token_document(rng: np.random.Generator, doc_id: str) -> tuple[Document, np.ndarray]:
    views = rng.standard_normal((int(rng.integers(1, 12)), DIM)).astype(np.float32)
    views /= np.linalg.norm(views, axis=1, keepdims=True)
    spans = [[j, j + 1] for j in range(len(views))]
    meta = {"mvr_views": views.tolist(), "mvr_view_spans": spans, "group": int(rng.integers(0, 3))}
    return Document(id=doc_id, content="x" * (len(views) + 1), meta=meta), views


@pytest.mark.parametrize(("name", "keep_vectors"), CASES, ids=[f"{n}-keep{int(k)}" for n, k in CASES])
def test_maxsim_equals_brute_force_under_random_writes_deletes_and_filters(name, keep_vectors, monkeypatch):
    monkeypatch.setattr(ViewIndex, "maxsim_depth", 10_000)  # every document a candidate: the ranking must be exact
    options, _, _ = CONFIGS[name]
    store = FaissMultiViewDocumentStore(embedding_dim=DIM, keep_vectors=keep_vectors, **options)
    rng = np.random.default_rng(len(name) * 7 + keep_vectors)
    corpus: dict[str, np.ndarray] = {}
    groups: dict[str, int] = {}
    exact_rows = keep_vectors or CONFIGS[name][1] or name == "HNSW"
    for step in range(6):
        batch = []
        for _ in range(int(rng.integers(5, 25))):
            doc_id = f"d{int(rng.integers(0, 90))}"
            doc, views = token_document(rng, doc_id)
            batch.append(doc)
            corpus[doc_id], groups[doc_id] = views, doc.meta["group"]
        batch = list({d.id: d for d in batch}.values())
        store.write_documents(batch, policy=DuplicatePolicy.OVERWRITE)
        if step % 2:
            gone = [i for i in list(corpus) if rng.random() < 0.15]
            store.delete_documents(gone)
            for doc_id in gone:
                corpus.pop(doc_id)
                groups.pop(doc_id)
        for filters in (None, {"field": "meta.group", "operator": "==", "value": 1}):
            allowed = {i for i in corpus if filters is None or groups[i] == 1}
            query = rng.standard_normal((int(rng.integers(2, 6)), DIM)).astype(np.float32)
            top_k = int(rng.integers(1, 15))
            found = store.search(query, top_k=top_k, filters=filters, return_embedding=True)
            assert len(found) == min(top_k, len(allowed))
            for doc in found:
                held = doc.meta["mvr_views"].matrix  # the rows the store scored (a lossy index's reconstruction)
                assert doc.score == pytest.approx(float((held @ query.T).max(axis=0).sum()), rel=1e-5, abs=1e-5)
                assert doc.id in allowed
            assert [d.score for d in found] == sorted((d.score for d in found), reverse=True)
            if exact_rows:
                expected = brute_force(query, corpus, allowed)[:top_k]
                assert [d.id for d in found] == [i for i, _ in expected]
                np.testing.assert_allclose([d.score for d in found], [s for _, s in expected], rtol=1e-5)


def test_a_flat_index_ranks_every_document_exactly_at_the_default_depth():
    rng = np.random.default_rng(3)
    store = FaissMultiViewDocumentStore(embedding_dim=DIM)
    corpus = {}
    docs = []
    for i in range(400):
        doc, views = token_document(rng, f"d{i}")
        docs.append(doc)
        corpus[doc.id] = views
    store.write_documents(docs)
    for _ in range(5):
        query = rng.standard_normal((4, DIM)).astype(np.float32)
        found = store.search(query, top_k=10)
        assert [d.id for d in found] == [i for i, _ in brute_force(query, corpus, set(corpus))[:10]]


def test_a_multi_vector_result_says_which_tokens_matched():
    store = FaissMultiViewDocumentStore(embedding_dim=4)
    eye = np.eye(4, dtype=np.float32)
    doc = Document(
        id="a",
        content="river Vistula Poland",
        meta={"mvr_views": eye[:3].tolist(), "mvr_view_spans": [[0, 5], [6, 13], [14, 20]]},
    )
    store.write_documents([doc])
    query = np.array([[0, 2, 0, 0], [0, 0, 1, 0], [0, 1.5, 0, 0]], dtype=np.float32)
    (found,) = store.search(query, top_k=1)
    assert found.score == pytest.approx(2 + 1 + 1.5)
    assert found.meta["mvr_matched_spans"] == [[6, 13], [14, 20]]
    assert found.meta["mvr_matched_view"] == 1 and found.meta["mvr_matched_scope"] == "snippet"
    assert found.meta["mvr_matched_text"] == "river Vistula Poland"  # the short sentence the matched tokens are in
    assert found.meta["mvr_matched_span"] == [0, 20]


def _token_page(content: str, dim: int = 64) -> tuple[Document, list[tuple[int, int]], np.ndarray]:
    """A ColBERT-like document: a [CLS] view without a span, then one unit view per word."""
    import re

    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", content)]
    views = np.zeros((len(words) + 1, dim), dtype=np.float32)
    views[0, 0] = 1.0  # [CLS]
    for i in range(len(words)):
        views[i + 1, i + 1] = 1.0
    spans = [None, *[list(w) for w in words]]
    return (
        Document(id="page", content=content, meta={"mvr_views": views.tolist(), "mvr_view_spans": spans}),
        words,
        views,
    )


def test_a_late_interaction_result_shows_what_matched_in_words_not_cls_or_a_lone_token():
    """With a ColBERT model README block 1 printed "[document] None" ([CLS] contributed most) and "[snippet] the"
    (issue 57): the text is now the sentence around the tokens most query vectors matched."""
    content = (
        "The city has many bridges. Warsaw lies on the river Vistula in Poland. Its old town was rebuilt after the war."
    )
    doc, words, views = _token_page(content)
    texts = [content[a:b] for a, b in words]
    store = FaissMultiViewDocumentStore(embedding_dim=views.shape[1])
    store.write_documents([doc])
    query = np.zeros((5, views.shape[1]), dtype=np.float32)
    query[0, 0] = query[1, 0] = 3.0  # [CLS] contributes most
    for row, word in zip((2, 3, 4), ("river", "Vistula", "Poland."), strict=True):
        query[row, texts.index(word) + 1] = 1.0
    (found,) = store.search(query, top_k=1)
    assert found.meta["mvr_matched_view"] == 0 and found.meta["mvr_matched_scope"] == "document"
    assert found.meta["mvr_matched_text"] == "Warsaw lies on the river Vistula in Poland."
    start, end = found.meta["mvr_matched_span"]
    assert content[start:end] == found.meta["mvr_matched_text"]
    assert found.meta["mvr_matched_spans"] == sorted(
        list(words[texts.index(w)]) for w in ("river", "Vistula", "Poland.")
    )

    query[2:] = 0
    query[2, texts.index("The") + 1] = 0.5  # one stopword token, beside [CLS]: its sentence, not "The"
    (found,) = store.search(query, top_k=1)
    assert found.meta["mvr_matched_text"] == "The city has many bridges."


def test_text_without_sentence_ends_shows_a_window_of_whole_words():
    words = [f"word{i}" for i in range(200)]
    content = " ".join(words)  # a transcript: no sentence ends
    doc, _, _ = _token_page(content, dim=256)
    store = FaissMultiViewDocumentStore(embedding_dim=256)
    store.write_documents([doc])
    query = np.zeros((3, 256), dtype=np.float32)
    for row, i in enumerate((100, 102, 104)):
        query[row, i + 1] = 1.0
    (found,) = store.search(query, top_k=1)
    text = found.meta["mvr_matched_text"]
    assert text.split() == words[100:105]  # the stretch of matched tokens, whole words, not the whole page


def test_a_one_row_query_matrix_is_the_single_vector_search():
    rng = np.random.default_rng(5)
    store = FaissMultiViewDocumentStore(embedding_dim=DIM)
    store.write_documents([token_document(rng, f"d{i}")[0] for i in range(30)])
    query = rng.standard_normal(DIM).astype(np.float32)
    one = store.search(query, top_k=5)
    matrix = store.search(query[None, :], top_k=5)
    assert [(d.id, d.score) for d in one] == [(d.id, d.score) for d in matrix]


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        (np.zeros((2, 3), dtype=np.float32), "dimension 3"),
        (np.full((2, DIM), np.nan, dtype=np.float32), "NaN"),
        (np.zeros((0, DIM), dtype=np.float32), "shape"),
    ],
)
def test_a_bad_multi_vector_query_is_refused_and_nothing_is_lost(query, problem):
    rng = np.random.default_rng(9)
    store = FaissMultiViewDocumentStore(embedding_dim=DIM)
    store.write_documents([token_document(rng, f"d{i}")[0] for i in range(5)])
    with pytest.raises(ValueError, match=problem):
        store.search(query, top_k=3)
    assert store.count_documents() == 5


def test_the_shortlist_keeps_the_documents_ranked_best_across_the_query_vectors():
    from haystack_mvr.document_stores.faiss.view_index import _shortlist

    found = [np.array([5, 1, 2]), np.array([1, 7, 5]), np.array([9, 1])]
    assert _shortlist(found, 2).tolist() == [1, 5]  # 1 is in every list, 5 in two near the top
    assert _shortlist(found, 10).tolist() == [1, 5, 9, 7, 2]  # all of them, still best first
    assert _shortlist([np.zeros(0, dtype=np.int64)], 3).tolist() == []


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_maxsim_query_whose_scores_could_pass_float32_is_refused(sign):
    """Views and query vectors under the 1e18 norm limit, but 2,000 query vectors: MaxSim sums past float32's 3.4e38,
    and a Flat search returned documents the filter excludes, with infinite scores."""
    store = FaissMultiViewDocumentStore(embedding_dim=4)
    rng = np.random.default_rng(0)
    docs = []
    for i in range(6):
        views = rng.standard_normal((3, 4))
        views *= 0.9e18 / np.linalg.norm(views, axis=1, keepdims=True)
        docs.append(Document(id=f"d{i}", content="x", meta={"mvr_views": views.tolist(), "group": i % 2}))
    store.write_documents(docs)
    query = np.full((2000, 4), sign * 0.45e18)
    with pytest.raises(
        ValueError, match=r"query_embedding: its 2000 vectors' L2 norms sum to 1\.8e\+21, above the 1e\+20"
    ):
        store.search(query, top_k=6, filters={"field": "meta.group", "operator": "==", "value": 1})
    assert store.count_documents() == 6  # nothing stored is lost
    found = store.search(query[:100], top_k=6, filters={"field": "meta.group", "operator": "==", "value": 1})
    assert [d.meta["group"] for d in found] == [1, 1, 1]  # within the bound: finite, filtered, exact
    for doc in found:
        held = np.asarray(docs[int(doc.id[1:])].meta["mvr_views"], dtype=np.float32)
        assert np.isfinite(doc.score)
        assert doc.score == float((held @ query[:100].astype(np.float32).T).max(axis=0).sum())
