"""Zero-shot token views of a plain backbone (``mode="tokens"``): the backbone's own final hidden states, one
L2-normalised vector per token, several query vectors, MaxSim equal to sentence-transformers' own scoring."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from haystack import Document, Pipeline
from haystack.components.writers import DocumentWriter
from sentence_transformers.base.modules import Transformer

from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder
from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.modeling.late_interaction import LateInteractionEncoder
from haystack_mvr.modeling.st_encoder import open_encoder

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TEXTS = [
    "The Vistula is the longest river in Poland, at 1,047 km.",
    "Warsaw, the capital, lies on it. " * 30,  # past one window of the 64-token test setting
    "Kraków is older!",
]


def hidden_states(backbone, text: str) -> np.ndarray:
    """The backbone's last hidden states for ``text`` (transformers directly), L2-normalised."""
    transformer = Transformer(str(backbone))
    features = transformer.tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        states = transformer.model(**features).last_hidden_state[0]
    return torch.nn.functional.normalize(states, dim=-1).numpy()


def test_tokens_mode_opens_a_backbone_as_token_views(tiny_backbone):
    encoder = open_encoder(tiny_backbone, "cpu", mode="tokens")
    assert isinstance(encoder, LateInteractionEncoder)
    identity = encoder.identity(tiny_backbone)
    assert identity["mode"] == "tokens" and identity["scoring"] == "maxsim"
    colbert_like = open_encoder(tiny_backbone, "cpu", mode="tokens", skiplist="punctuation")
    assert colbert_like.identity(tiny_backbone)["fingerprint"] != identity["fingerprint"]  # another encoder
    again = open_encoder(tiny_backbone, "cpu", mode="tokens")
    assert again.identity(tiny_backbone) == identity  # no random weights: the same encoder every load


def test_a_token_view_is_the_backbones_own_normalised_hidden_state(tiny_backbone):
    encoder = LateInteractionEncoder.tokens(tiny_backbone)
    text = TEXTS[0]
    (doc,) = encoder.encode_documents([text])
    expected = hidden_states(tiny_backbone, text)
    np.testing.assert_allclose(doc.views, expected, atol=1e-5)  # every token, [CLS] and [SEP] included
    np.testing.assert_allclose(np.linalg.norm(doc.views, axis=1), 1.0, atol=1e-5)
    assert doc.spans[0] is None and doc.spans[-1] is None  # the special tokens have no span
    assert [text[s:e] for s, e in doc.spans[1:3]] == ["The", "Vis"]  # one view a WordPiece


def test_punctuation_is_skipped_in_documents_only_when_asked(tiny_backbone):
    plain = LateInteractionEncoder.tokens(tiny_backbone).encode_documents([TEXTS[0]])[0]
    skipped = LateInteractionEncoder.tokens(tiny_backbone, skiplist="punctuation").encode_documents([TEXTS[0]])[0]
    words = [TEXTS[0][s:e] for s, e in (span for span in plain.spans if span)]
    kept = [TEXTS[0][s:e] for s, e in (span for span in skipped.spans if span)]
    assert "," in words and "." in words
    assert "," not in kept and "." not in kept and len(kept) == len(words) - sum(w in ",." for w in words)


def test_a_long_document_is_read_whole_in_windows(tiny_backbone):
    encoder = LateInteractionEncoder.tokens(tiny_backbone, doc_max_length=64)
    (doc,) = encoder.encode_documents([TEXTS[1]])
    spans = [s for s in doc.spans if s is not None]
    assert len(doc.views) > 64
    assert max(e for _, e in spans) == len(TEXTS[1].rstrip())  # the last word was read
    assert all(0 <= s < e <= len(TEXTS[1]) for s, e in spans)


def test_queries_are_several_vectors_and_maxsim_is_the_models_similarity(tiny_backbone):
    encoder = LateInteractionEncoder.tokens(tiny_backbone)
    docs = encoder.encode_documents([TEXTS[0], TEXTS[2]])
    queries = encoder.query_views(["which river is the longest?", "old"])
    assert [q.shape[0] for q in queries] == [8, 3]  # every query token, no expansion
    reference = encoder.model.encode_document([TEXTS[0], TEXTS[2]])
    expected = encoder.model.similarity([torch.from_numpy(q) for q in queries], reference).numpy()
    ours = np.array([[float((d.views @ q.T).max(axis=0).sum()) for d in docs] for q in queries])
    np.testing.assert_allclose(ours, expected, rtol=1e-5)
    with pytest.raises(TypeError, match="several vectors"):
        encoder.encode_queries(["one vector?"])


def test_query_expansion_pads_queries_with_mask(tiny_backbone):
    encoder = LateInteractionEncoder.tokens(tiny_backbone, query_expansion=12)
    assert encoder.query_views(["old"])[0].shape[0] == 12


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"num_views": 4}, "encoder_kwargs"),
        ({"skiplist": "stopwords"}, "skiplist"),
        ({"query_expansion": -1}, "query_expansion"),
        ({"query_expansion": True}, "query_expansion"),
        ({"doc_max_length": 0}, "doc_max_length"),
    ],
)
def test_bad_token_options_are_refused_by_name(tiny_backbone, options, match):
    with pytest.raises(ValueError, match=match):
        open_encoder(tiny_backbone, "cpu", mode="tokens", **options)


def test_token_views_run_through_the_readme_pipelines_and_rank_by_maxsim(tiny_backbone):
    model, kwargs = str(tiny_backbone), {"mode": "tokens"}
    store = FaissMultiViewDocumentStore(index_factory="Flat")
    indexing = Pipeline()
    indexing.add_component("embedder", MultiViewDocumentEmbedder(model=model, encoder_kwargs=kwargs))
    indexing.add_component("writer", DocumentWriter(document_store=store))
    indexing.connect("embedder.documents", "writer.documents")
    indexing.run({"embedder": {"documents": [Document(id=str(i), content=t) for i, t in enumerate(TEXTS)]}})
    querying = Pipeline()
    querying.add_component(
        "query_embedder", MultiViewTextEmbedder(model=model, embedding_output="packed", encoder_kwargs=kwargs)
    )
    querying.add_component("retriever", MultiViewRetriever(document_store=store, top_k=3))
    querying.connect("query_embedder.packed_embedding", "retriever.packed_query_embedding")
    querying.connect("query_embedder.encoder", "retriever.encoder")
    question = "Which river is the longest in Poland?"
    documents = querying.run({"query_embedder": {"text": question}})["retriever"]["documents"]
    encoder = LateInteractionEncoder.tokens(tiny_backbone)
    query = encoder.query_views([question])[0]
    # the title-less texts as the embedder read them: exact MaxSim by brute force
    expected = {
        str(i): float((d.views @ query.T).max(axis=0).sum()) for i, d in enumerate(encoder.encode_documents(TEXTS))
    }
    assert [d.id for d in documents] == sorted(expected, key=lambda k: -expected[k])
    np.testing.assert_allclose([d.score for d in documents], sorted(expected.values(), reverse=True), rtol=1e-5)
    assert store.encoder_config["mode"] == "tokens"
    loaded = Pipeline.loads(querying.dumps())  # the YAML keeps the mode
    assert loaded.get_component("query_embedder").encoder_kwargs == kwargs
    snippet_query = Pipeline()  # a snippet-mode query (one vector) against a token store is refused
    snippet_query.add_component("query_embedder", MultiViewTextEmbedder(model=model, embedding_output="packed"))
    snippet_query.add_component("retriever", MultiViewRetriever(document_store=store, top_k=3))
    snippet_query.connect("query_embedder.packed_embedding", "retriever.packed_query_embedding")
    snippet_query.connect("query_embedder.encoder", "retriever.encoder")
    with pytest.raises(Exception, match="encoder"):
        snippet_query.run({"query_embedder": {"text": question}})


@pytest.mark.integration
def test_the_packaged_minilm_reads_documents_at_its_own_window(minilm):
    encoder = open_encoder(minilm, "cpu", mode="tokens")
    assert encoder.identity(minilm)["doc_max_length"] == 256  # sentence_bert_config.json's max_seq_length
    (doc,) = encoder.encode_documents(["Warsaw is the capital of Poland."])
    assert doc.views.shape == (9, 384)
