"""A ColBERT (sentence-transformers ``MultiVectorEncoder``) through the encoder interface: token views with their
spans, windows for long documents, several query vectors, and MaxSim equal to the model's own similarity."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import torch
from sentence_transformers import MultiVectorEncoder

from haystack_mvr.modeling.late_interaction import LateInteractionEncoder
from haystack_mvr.modeling.loading import is_late_interaction_checkpoint
from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter, open_encoder

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TEXTS = [
    "The Vistula is the longest river in Poland, at 1,047 km.",
    "Warsaw, the capital, lies on it.",
    "Kraków is older!",
]


def maxsim(query: np.ndarray, views: np.ndarray) -> float:
    return float((views @ query.T).max(axis=0).sum())


def test_a_multi_vector_encoder_folder_opens_as_a_late_interaction_encoder(tiny_colbert, tiny_backbone):
    assert is_late_interaction_checkpoint(str(tiny_colbert))
    assert not is_late_interaction_checkpoint(str(tiny_backbone))
    encoder = open_encoder(tiny_colbert, "cpu")
    assert isinstance(encoder, LateInteractionEncoder)
    identity = encoder.identity(tiny_colbert)
    assert identity["mode"] == "late_interaction" and identity["scoring"] == "maxsim"
    json.dumps(identity)
    assert isinstance(open_encoder(tiny_backbone, "cpu"), MultiVectorEncoderAdapter)  # a backbone: snippet mode


def test_encoder_options_are_refused_for_a_late_interaction_model(tiny_colbert):
    with pytest.raises(ValueError, match="late-interaction"):
        open_encoder(tiny_colbert, "cpu", num_views=4)


def test_token_views_and_maxsim_equal_the_models_own(tiny_colbert):
    encoder = open_encoder(tiny_colbert, "cpu")
    model: MultiVectorEncoder = encoder.model
    short = ["Warsaw, the capital, lies on it.", "Kraków is older!"]  # one window each
    docs = encoder.encode_documents(short)
    reference = model.encode_document(short)
    for doc, ref in zip(docs, reference, strict=True):
        np.testing.assert_allclose(doc.views, ref.numpy(), atol=1e-6)
        assert len(doc.spans) == len(doc.views)
    queries = encoder.query_views(["which city is the capital?", "old"])
    assert all(q.shape == (8, 16) for q in queries)  # query expansion to 8 tokens
    expected = model.similarity([torch.from_numpy(q) for q in queries], reference).numpy()
    ours = np.array([[maxsim(q, d.views) for d in docs] for q in queries])
    np.testing.assert_allclose(ours, expected, rtol=1e-5)


def test_each_token_view_carries_its_tokens_span(tiny_colbert):
    encoder = open_encoder(tiny_colbert, "cpu")
    text = "Warsaw, the capital, lies on it."
    (doc,) = encoder.encode_documents([text])
    tokenizer = encoder.transformer.tokenizer
    pieces = [text[s:e].lower() for s, e in (span for span in doc.spans if span is not None)]
    words = [t.removeprefix("##") for t in tokenizer.tokenize(text) if t not in {",", "."}]  # punctuation skipped
    assert pieces == words
    assert doc.spans[0] is None and doc.spans[-1] is None  # [CLS] and [SEP]


def test_a_long_document_is_read_in_word_aligned_windows(tiny_colbert):
    encoder = open_encoder(tiny_colbert, "cpu")
    text = " ".join(f"Sentence number {i} talks about unbelievably interesting rivers." for i in range(12))
    windows = encoder.windows(text)
    assert len(windows) > 3
    assert windows[0][0] == 0 and windows[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(windows))  # contiguous, nothing dropped
    tokenizer = encoder.transformer.tokenizer
    for start, end in windows:
        assert len(tokenizer(text[start:end])["input_ids"]) <= encoder.document_length
        assert start == 0 or text[start - 1] == " " or not text[start - 1].isalnum()  # never inside a word
    (doc,) = encoder.encode_documents([text])
    expected = sum(len(encoder.encode_documents([text[s:e]])[0].views) for s, e in windows)
    assert len(doc.views) == expected
    located = [text[s:e].lower() for s, e in (span for span in doc.spans if span is not None)]
    assert "unbelievably"[:4] in "".join(located) and all(piece.strip() == piece for piece in located)


def test_an_empty_document_still_gets_its_special_token_views(tiny_colbert):
    encoder = open_encoder(tiny_colbert, "cpu")
    (doc,) = encoder.encode_documents([""])
    assert len(doc.views) >= 1 and all(span is None for span in doc.spans)


def test_a_one_megabyte_document_is_encoded_a_window_batch_at_a_time(tiny_colbert):
    encoder = open_encoder(tiny_colbert, "cpu")
    text = ("The Vistula river flows north through Warsaw to the Baltic Sea. " * 16_000)[:1_000_000]
    calls = []
    original = encoder.model.encode_document

    def spy(texts, **kwargs):  # what the backbone is handed at once
        calls.append((len(texts), max(len(encoder.transformer.tokenizer(t)["input_ids"]) for t in texts)))
        return original(texts, **kwargs)

    encoder.model.encode_document = spy
    (doc,) = encoder.encode_documents([text], batch_size=64)
    assert len(calls) > 100 and all(n <= 64 and tokens <= encoder.document_length for n, tokens in calls)
    assert len(doc.views) == len(doc.spans) > 100_000
    assert max(e for _, e in (s for s in doc.spans if s is not None)) >= len(text) - 5


def test_asking_a_colbert_for_one_query_vector_is_a_clear_error(tiny_colbert):
    with pytest.raises(TypeError, match="several vectors"):
        open_encoder(tiny_colbert, "cpu").encode_queries(["one vector?"])
