"""Text without sentence ends still gets one view per ``snippet_tokens`` tokens; paragraphs keep their snippets."""

from __future__ import annotations

import itertools
import json
import math
import random

import pytest

from haystack_mvr.modeling.encoder_inspection import snippet_spans
from haystack_mvr.modeling.sentence_units import sentence_units
from haystack_mvr.modeling.snippets import merge_groups, snippet_count
from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter

WORDS = ["river", "castle", "music", "winter", "bridge", "garden", "engine", "poem", "market", "storm"]


def unpunctuated(words: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(words))


@pytest.fixture(scope="module")
def paragraph_encoder(tiny_backbone):
    """Snippet mode with the defaults (a 256-token window, 8 snippets at least, 64 tokens per snippet)."""
    return MultiVectorEncoderAdapter.snippet(tiny_backbone, device="cpu", snippet_encoding="late_chunking")


def token_count(encoder, text: str) -> int:
    return len(encoder.model[0].tokenizer(text, add_special_tokens=False)["input_ids"])


def spans_before(encoder, text: str) -> list[tuple[int, int]]:
    """The snippets as cut before pieces followed ``snippet_tokens``: every sentence longer than half a window cut
    into pieces of at most half a window, then merged into ``snippet_count`` snippets."""
    transformer = encoder.model[0]
    prefix, suffix = transformer._specials()
    half = (encoder.config.doc_max_length - len(prefix) - len(suffix)) // 2
    encoded = transformer.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    units = sentence_units(text, encoded["offset_mapping"], half)
    config = encoder.config
    count = snippet_count(len(encoded["input_ids"]), config.num_views, config.snippet_tokens, config.max_views - 1)
    return [(units[a][0], units[b - 1][1]) for a, b in merge_groups([(u[0], u[1]) for u in units], count)]


@pytest.mark.parametrize("snippet_tokens", [64, 32])
def test_text_without_sentence_ends_gets_one_view_per_snippet_tokens(tiny_backbone, snippet_tokens):
    encoder = MultiVectorEncoderAdapter.snippet(
        tiny_backbone, device="cpu", snippet_tokens=snippet_tokens, snippet_encoding="late_chunking"
    )
    text = unpunctuated(6000)
    tokens = token_count(encoder, text)
    spans = snippet_spans(encoder.model, [text])[0]
    assert len(spans) == math.ceil(tokens / snippet_tokens)  # was about tokens / 127: half a window per piece
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    lengths = [token_count(encoder, text[s:e]) for s, e in spans]
    assert max(lengths) <= snippet_tokens


def test_the_forward_pass_gives_those_views(tiny_backbone):
    encoder = MultiVectorEncoderAdapter.snippet(
        tiny_backbone, device="cpu", doc_max_length=64, snippet_tokens=16, snippet_encoding="late_chunking"
    )
    text = unpunctuated(400, seed=1)
    encoded = encoder.encode_documents([text])[0]
    assert encoded.views.shape[0] == 1 + math.ceil(token_count(encoder, text) / 16)
    assert list(encoded.spans[1:]) == snippet_spans(encoder.model, [text])[0]


def test_a_saved_checkpoint_cuts_long_sentences_alike_when_loaded_by_sentence_transformers(tiny_backbone, tmp_path):
    from sentence_transformers import MultiVectorEncoder

    from haystack_mvr.modeling.encoder_builders import snippet_encoder

    snippet_encoder(tiny_backbone, num_snippets=2, snippet_tokens=16).save(str(tmp_path / "st"))
    loaded = MultiVectorEncoder(str(tmp_path / "st"), device="cpu", trust_remote_code=True)
    text = unpunctuated(500, seed=2)
    spans = snippet_spans(loaded, [text])[0]
    adapter = MultiVectorEncoderAdapter.load(tmp_path / "st", device="cpu")
    assert spans == snippet_spans(adapter.model, [text])[0]
    assert len(spans) == math.ceil(token_count(adapter, text) / 16)


def test_punctuated_paragraphs_keep_the_snippets_they_had(paragraph_encoder):
    """Ordinary paragraphs, one with a 150-token sentence (a list), are cut exactly as before."""
    listing = "The market sold " + ", ".join(f"{WORDS[i % 10]} {i}" for i in range(50)) + " and bread."
    texts = [
        "Warsaw is the capital of Poland. It lies on the Vistula. Its old town was rebuilt after 1945.",
        "Super Bowl 50 was an American football game. The Denver Broncos won it. " + listing + " It rained.",
        " ".join(f"Sentence {i} tells of the {WORDS[i % 10]} and the {WORDS[(i * 3) % 10]}." for i in range(40)),
    ]
    assert token_count(paragraph_encoder, listing) > 127  # longer than half the window
    got = snippet_spans(paragraph_encoder.model, texts)
    assert got == [spans_before(paragraph_encoder, t) for t in texts]


def test_squad_mv_paragraphs_keep_the_snippets_they_had(paragraph_encoder):
    from tests.conftest import shared_data_dir

    corpus = shared_data_dir() / "squad-mv" / "corpus.jsonl"
    if not corpus.is_file():
        pytest.skip("the shared squad-mv data is not beside this clone")
    with corpus.open(encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    texts = [f"{r['title']}\n{r['text']}" for r in records]  # as the examples and `eval` embed them
    for start in range(0, len(texts), 256):
        batch = texts[start : start + 256]
        assert snippet_spans(paragraph_encoder.model, batch) == [spans_before(paragraph_encoder, t) for t in batch]
