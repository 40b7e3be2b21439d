"""A ColBERT checkpoint (sentence-transformers ``MultiVectorEncoder``) dropped into the README's pipelines: the same
components and wiring, the FAISS store ranking by MaxSim, equal to the model's own similarity."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from haystack import Document, Pipeline
from haystack.components.writers import DocumentWriter

from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder
from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TEXTS = [
    "The Vistula is the longest river in Poland.",
    "Warsaw is the capital of Poland and lies on the Vistula.",
    "Genghis Khan founded the Mongol Empire in 1206.",
    "The Yuan dynasty was founded by Kublai Khan, a grandson of Genghis Khan.",
    " ".join(f"Paragraph {i} of a long page about the rivers of Europe and their bridges." for i in range(20)),
]


def indexed_store(model, store=None):
    store = store if store is not None else FaissMultiViewDocumentStore()
    indexing = Pipeline()
    indexing.add_component("embedder", MultiViewDocumentEmbedder(model=str(model), progress_bar=False))
    indexing.add_component("writer", DocumentWriter(document_store=store))
    indexing.connect("embedder", "writer")
    indexing.run({"embedder": {"documents": [Document(id=str(i), content=t) for i, t in enumerate(TEXTS)]}})
    return store


def query_pipeline(model, store) -> Pipeline:
    query = Pipeline()
    query.add_component("embedder", MultiViewTextEmbedder(model=str(model), embedding_output="packed"))
    query.add_component("retriever", MultiViewRetriever(document_store=store, top_k=5))
    query.connect("embedder.packed_embedding", "retriever.packed_query_embedding")
    query.connect("embedder.encoder", "retriever.encoder")
    return query


def test_the_readme_pipelines_rank_a_colbert_by_exact_maxsim(tiny_colbert):
    store = indexed_store(tiny_colbert)
    pipeline = query_pipeline(tiny_colbert, store)
    question = "Which river is the longest in Poland?"
    found = pipeline.run({"embedder": {"text": question}})["retriever"]["documents"]
    assert len(found) == len(TEXTS)
    model = pipeline.get_component("embedder").encoder.model
    short = TEXTS[:4]  # one window each: the model's own encode_document reads them whole
    expected = model.similarity(model.encode_query([question]), model.encode_document(short))[0].numpy()
    scores = {d.id: d.score for d in found}
    np.testing.assert_allclose([scores[str(i)] for i in range(4)], expected, rtol=1e-5)
    assert [d.score for d in found] == sorted(scores.values(), reverse=True)
    for doc in found:
        assert doc.meta["mvr_matched_spans"], "a result says which tokens matched"
        for start, end in doc.meta["mvr_matched_spans"]:
            assert 0 <= start < end <= len(doc.content)


def test_faiss_and_qdrant_rank_a_colbert_alike(tiny_colbert):
    from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore

    faiss_store = indexed_store(tiny_colbert)
    qdrant_store = indexed_store(tiny_colbert, QdrantMultiViewDocumentStore())
    for question in ("Which river is the longest in Poland?", "Who founded the Yuan dynasty?"):
        ours = query_pipeline(tiny_colbert, faiss_store).run({"embedder": {"text": question}})
        theirs = query_pipeline(tiny_colbert, qdrant_store).run({"embedder": {"text": question}})
        a, b = ours["retriever"]["documents"], theirs["retriever"]["documents"]
        assert [d.id for d in a] == [d.id for d in b]
        np.testing.assert_allclose([d.score for d in a], [d.score for d in b], rtol=1e-5)
        assert [d.meta["mvr_matched_spans"] for d in a] == [d.meta["mvr_matched_spans"] for d in b]


def test_the_long_page_is_stored_as_every_windows_tokens(tiny_colbert):
    store = indexed_store(tiny_colbert)
    stored = [d for batch in store.export_documents() for d in batch]
    long_page = next(d for d in stored if d.id == "4")
    views = long_page.meta["mvr_views"]
    rows = views.matrix if hasattr(views, "matrix") else np.asarray(views)
    assert len(rows) > 24  # past one 24-token window
    spans = [s for s in long_page.meta["mvr_view_spans"] if s is not None]
    assert max(e for _, e in spans) > len(TEXTS[4]) - 10  # the page's end was read


def test_the_list_socket_is_refused_for_a_late_interaction_query(tiny_colbert):
    store = indexed_store(tiny_colbert)
    query = Pipeline()
    query.add_component("embedder", MultiViewTextEmbedder(model=str(tiny_colbert)))
    query.add_component("retriever", MultiViewRetriever(document_store=store))
    query.connect("embedder.embedding", "retriever.query_embedding")
    query.connect("embedder.encoder", "retriever.encoder")
    with pytest.raises(Exception, match="packed_embedding"):
        query.run({"embedder": {"text": "Poland"}})


def test_a_colbert_query_against_a_multi_view_index_is_refused(tiny_colbert, tiny_backbone):
    store = indexed_store(tiny_backbone)  # snippet mode on a backbone
    with pytest.raises(Exception, match="encoder"):
        query_pipeline(tiny_colbert, store).run({"embedder": {"text": "Poland"}})
    assert store.count_documents() == len(TEXTS)


def test_a_store_refuses_colbert_documents_beside_multi_view_ones(tiny_backbone, tmp_path):
    from haystack_mvr.modeling.late_interaction import new_late_interaction_model

    same_width = tmp_path / "colbert-32"  # as wide as the backbone's views: only the encoder check can refuse it
    new_late_interaction_model(tiny_backbone, query_tokens=8, document_tokens=24, dim=32, device="cpu").save(
        str(same_width)
    )
    store = indexed_store(tiny_backbone)
    embedded = MultiViewDocumentEmbedder(model=str(same_width), progress_bar=False).run(
        [Document(id="new", content="A new page.")]
    )["documents"]
    with pytest.raises(ValueError, match="encoder"):
        store.write_documents(embedded)
    assert store.count_documents() == len(TEXTS)


def test_the_query_pipeline_yaml_loads_back_and_answers_alike(tiny_colbert):
    store = indexed_store(tiny_colbert)
    pipeline = query_pipeline(tiny_colbert, store)
    first = pipeline.run({"embedder": {"text": "Mongol Empire"}})["retriever"]["documents"]
    loaded = Pipeline.loads(pipeline.dumps())
    loaded.get_component("retriever").document_store = store
    again = loaded.run({"embedder": {"text": "Mongol Empire"}})["retriever"]["documents"]
    assert [(d.id, d.score) for d in again] == [(d.id, d.score) for d in first]
    torch.set_num_threads(1)


def token_view_page(n_sentences: int) -> tuple[FaissMultiViewDocumentStore, list[str], np.ndarray]:
    """A store of one page: ``n_sentences`` sentences of four words, one token view per word (an identity matrix);
    and a query whose three vectors match words 9-11 (the third sentence)."""
    words = [f"w{i}" for i in range(4 * n_sentences)]
    sentences = [" ".join(words[4 * s : 4 * s + 4]) + "." for s in range(n_sentences)]
    text = " ".join(sentences)
    spans, start = [], 0
    for word in words:
        start = text.index(word, start)
        spans.append([start, start + len(word)])
        start += len(word)
    views = np.eye(len(words), dtype=np.float32)
    store = FaissMultiViewDocumentStore(embedding_dim=len(words))
    store.write_documents(
        [Document(id="page", content=text, meta={"mvr_views": views.tolist(), "mvr_view_spans": spans})]
    )
    query = np.zeros((3, len(words)), dtype=np.float32)
    query[0, 9], query[1, 10], query[2, 11] = 1.0, 0.9, 0.8
    return store, sentences, query


def test_the_context_builder_seeds_pieces_where_the_query_tokens_matched():
    from haystack_mvr.components.builders import MultiViewContextBuilder
    from haystack_mvr.views import PackedViews

    store, sentences, query = token_view_page(4)
    (found,) = store.search(query, top_k=1)
    builder = MultiViewContextBuilder(document_store=store, budget_tokens=5, piece_tokens=5)
    pieces = builder.run(documents=[found], packed_query_embedding=PackedViews(query))["documents"]
    assert [p.content for p in pieces] == [sentences[2]]


def test_token_view_pieces_are_whole_sentences_around_the_match():
    from haystack_mvr.components.builders import MultiViewContextBuilder
    from haystack_mvr.views import PackedViews

    store, sentences, query = token_view_page(6)
    (found,) = store.search(query, top_k=1)
    builder = MultiViewContextBuilder(document_store=store, budget_tokens=10, piece_tokens=5)
    pieces = builder.run(documents=[found], packed_query_embedding=PackedViews(query))["documents"]
    texts = [p.content for p in pieces]
    assert sentences[2] in " ".join(texts)
    assert all(t.startswith("w") and t.endswith(".") for t in texts)  # no piece starts or ends inside a sentence
    assert pieces[0].meta["mvr_matched_text"] == "w10"  # the token that scored best in the piece


def test_token_match_scores_are_a_mean_over_the_query_vectors():
    from haystack_mvr.components.builders.multi_view_context_builder import token_match_scores

    views = np.eye(8, dtype=np.float32)
    query = np.zeros((4, 8), dtype=np.float32)
    query[:, 3] = 1.0  # every query vector matches view 3 fully
    scores = token_match_scores(views, query, window=0)
    assert scores[3] == 1.0 and scores.sum() == 1.0


def test_token_match_scores_peak_where_the_query_tokens_cluster():
    from haystack_mvr.components.builders.multi_view_context_builder import token_match_scores

    views = np.eye(40, dtype=np.float32)
    query = np.zeros((4, 40), dtype=np.float32)
    query[0, 3] = 0.5  # a lone match
    query[1, 30], query[2, 31], query[3, 32] = 0.6, 0.6, 0.6  # three close together
    scores = token_match_scores(views, query, window=8)
    assert int(scores.argmax()) == 31
    assert scores[3] < scores[31] and scores[15] == 0.0 and len(scores) == 40


def test_run_batch_refuses_a_late_interaction_query_instead_of_ranking_its_first_token(tiny_colbert):
    store = indexed_store(tiny_colbert)
    embedder = MultiViewTextEmbedder(model=str(tiny_colbert))
    out = embedder.run("Which river is the longest in Poland?")
    retriever = MultiViewRetriever(document_store=store)
    with pytest.raises(ValueError, match="several vectors"):
        retriever.run_batch(query_embeddings=[out["embedding"]], encoder=out["encoder"])
