"""Long documents tokenized in blocks and streamed pass by pass: the whole text's tokens, windows and views."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from haystack_mvr.modeling import window_stream
from haystack_mvr.modeling.config import POOLINGS
from haystack_mvr.modeling.inputs import pooling_weights, pooling_weights_at
from haystack_mvr.modeling.sentence_splitting import sentence_spans
from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter
from haystack_mvr.modeling.st_features import SENTENCES, WINDOWS, sentence_rows

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def narrow(tiny_backbone):
    """The tiny BERT (MiniLM's WordPiece tokenizer) with a 32-token window: short texts already need many windows."""
    torch.manual_seed(0)
    return MultiVectorEncoderAdapter.snippet(
        tiny_backbone,
        device="cpu",
        num_views=2,
        doc_max_length=32,
        snippet_tokens=8,
        window_overlap=4,
        snippet_encoding="late_chunking",
    )


def mixed_text(n: int, seed: int) -> str:
    """Sentences of many shapes: abbreviations, numbers, accents, CJK, punctuation runs, a sentence of 400 words."""
    rng = random.Random(seed)
    pieces = [
        "Dr. Smith met the U.S. envoy at 3.15 p.m. on Jan. 5, 1987.",
        "Café crème coûte 2,50 € — naïve façade!",
        "東京は日本の首都です。大阪も大きい\uff01",
        "Is it (really) true?! Yes... maybe.",
        "unbelievablyunrecognisablecompoundwords and hyphen-ated-ones.",
        " ".join(f"word{i}" for i in range(400)) + ".",
        "Short.",
        '"Quoted," she said. "Another one."',
    ]
    return "\n\n".join(" ".join(rng.choice(pieces) for _ in range(rng.randint(1, 4))) for _ in range(n))


def whole_tokens(tokenizer, text):
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    return encoded["input_ids"], [tuple(o) for o in encoded["offset_mapping"]]


@pytest.mark.parametrize("block_chars", [1, 50, 300, 2000])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_blocks_of_sentences_give_the_whole_texts_tokens(narrow, block_chars, seed):
    tokenizer = narrow.model[0].tokenizer
    text = mixed_text(12, seed)
    blocks = window_stream.sentence_blocks(sentence_spans(text), len(text), block_chars)
    assert len(blocks) > 2 and blocks[0][0] == 0 and blocks[-1][1] == len(text)
    ids, offsets = [], []
    for start, end in blocks:
        block_ids, block_offsets = window_stream.block_tokens(tokenizer, text, start, end)
        assert all(start <= s < end for s, _ in block_offsets)
        ids += block_ids
        offsets += block_offsets
    assert (ids, offsets) == whole_tokens(tokenizer, text)


@pytest.mark.parametrize("block_chars", [40, 400, 1 << 16])
def test_a_document_planned_in_blocks_has_the_whole_texts_windows_and_sentences(narrow, monkeypatch, block_chars):
    monkeypatch.setattr(window_stream, "BLOCK_CHARS", block_chars)
    transformer, views = narrow.model[0], narrow.model[1]
    text = mixed_text(10, seed=3)
    features = transformer.preprocess([text], task="document")
    document = window_stream.plan_document(transformer, views, text, transformer.content_capacity(32))
    assert (len(document.blocks) > 3) == (block_chars < 1000)
    assert document.units == [row for rows in sentence_rows(features[SENTENCES]) for row in rows]
    expected = [tuple(row[1:5]) for row in features[WINDOWS].tolist()]
    assert [(w.start, w.end, w.home_start, w.home_end) for w in document.windows] == expected
    rows = features["input_ids"][features["attention_mask"].bool()].split(
        features["attention_mask"].sum(dim=1).tolist()
    )
    streamed = list(window_stream.window_ids(transformer.tokenizer, document))
    assert streamed == [row[1:-1].tolist() for row in rows]  # without [CLS] and [SEP]


def test_views_streamed_from_blocks_equal_the_whole_forward_pass(narrow, monkeypatch):
    monkeypatch.setattr(window_stream, "BLOCK_CHARS", 200)
    monkeypatch.setattr(window_stream, "SORT_PASSES", 2)
    texts = [mixed_text(8, seed=4), mixed_text(3, seed=5), mixed_text(15, seed=6)]
    whole = narrow.model.encode_document(texts, batch_size=len(texts), output_value=None)
    streamed = narrow.encode_documents(texts, batch_size=3)
    for item, doc in zip(whole, streamed, strict=True):
        keep = item["attention_mask"].bool()
        np.testing.assert_allclose(doc.views, item["token_embeddings"][keep].numpy(), rtol=1e-5, atol=1e-5)
        assert doc.spans == [None if s < 0 else (s, e) for s, e in item["mvr_spans"][keep].tolist()]


def test_the_tokenizer_never_reads_more_than_a_block_of_a_long_document(narrow, monkeypatch):
    monkeypatch.setattr(window_stream, "BLOCK_CHARS", 300)
    tokenizer = narrow.model[0].tokenizer
    read = []
    original = type(tokenizer).__call__

    def spying(self, text=None, *args, **kwargs):
        read.append(len(text) if isinstance(text, str) else sum(map(len, text)))
        return original(self, text, *args, **kwargs)

    monkeypatch.setattr(type(tokenizer), "__call__", spying)
    text = " ".join(f"Sentence number {i} is about the river." for i in range(300))
    narrow.encode_documents([text])
    assert len(read) > 20 and max(read) <= 300 + 2 * window_stream.MARGIN_CHARS < len(text)


@pytest.mark.parametrize("pooling", POOLINGS)
def test_pooling_weights_at_positions_are_the_pooling_weights(pooling):
    for n in (1, 2, 7, 300):
        expected = pooling_weights(n, pooling).numpy()
        np.testing.assert_allclose(pooling_weights_at(np.arange(n), n, pooling), expected, rtol=1e-6)
        np.testing.assert_allclose(pooling_weights_at(np.array([n - 1, 0]), n, pooling), expected[[n - 1, 0]])


@pytest.mark.parametrize("pooling", ["cls", "lasttoken", "weightedmean"])
def test_streamed_views_follow_the_models_pooling(tiny_backbone, pooling):
    enc = MultiVectorEncoderAdapter.snippet(
        tiny_backbone,
        device="cpu",
        num_views=2,
        doc_max_length=32,
        snippet_tokens=8,
        pooling=pooling,
        snippet_encoding="late_chunking",
    )
    texts = [mixed_text(4, seed=7), mixed_text(6, seed=8)]
    whole = enc.model.encode_document(texts, batch_size=len(texts), output_value=None)
    for item, doc in zip(whole, enc.encode_documents(texts, batch_size=2), strict=True):
        keep = item["attention_mask"].bool()
        np.testing.assert_allclose(doc.views, item["token_embeddings"][keep].numpy(), rtol=1e-5, atol=1e-5)
