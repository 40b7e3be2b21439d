"""Snippet mode on documents longer than the backbone's window: every part is encoded, has views and can match."""

from __future__ import annotations

import dataclasses
import itertools
import random

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from haystack_mvr.modeling.snippets import merge_groups, snippet_count
from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter
from haystack_mvr.modeling.windows import plan_windows


def reference_merge(spans, n):
    """CAMVR Algorithm 1 as first written (quadratic): the heap version must merge exactly alike."""
    merged = list(spans)
    while len(merged) > n:
        lengths = [e - s for s, e in merged]
        i = lengths.index(min(lengths))
        j = 1 if i == 0 else i - 1 if i == len(merged) - 1 else (i - 1 if lengths[i - 1] <= lengths[i + 1] else i + 1)
        lo, hi = min(i, j), max(i, j)
        merged[lo : hi + 1] = [(merged[lo][0], merged[hi][1])]
    return merged


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 40), st.integers(0, 3)), max_size=40), st.integers(1, 12))
def test_heap_merge_equals_algorithm_one(pieces, n):
    spans, position = [], 0
    for length, gap in pieces:
        spans.append((position, position + length))
        position += length + gap
    groups = merge_groups(spans, n)
    assert [(spans[a][0], spans[b - 1][1]) for a, b in groups] == reference_merge(spans, n)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 3000), st.integers(4, 300), st.integers(0, 80), st.data())
def test_windows_partition_the_document_with_context(length, capacity, overlap, data):
    starts = sorted(set(data.draw(st.lists(st.integers(1, max(1, length - 1)), max_size=60))))
    windows = plan_windows(length, capacity, overlap, starts)
    assert windows[0].home_start == 0 and windows[-1].home_end == length
    context = min(overlap, capacity // 4)
    for before, after in itertools.pairwise(windows):
        assert before.home_end == after.home_start  # homes partition the tokens
    for w in windows:
        assert 0 <= w.start <= w.home_start <= w.home_end <= w.end <= length
        assert w.end - w.start <= capacity
        assert w.home_end > w.home_start or length == 0
        # a token sees `context` tokens each way in its home window, except at the document's ends
        assert w.home_start - w.start >= min(context, w.home_start)
        assert w.end - w.home_end >= min(context, length - w.home_end)
    if length <= capacity:
        assert len(windows) == 1 and windows[0].start == 0 and windows[0].end == length


def test_a_home_range_ends_at_a_sentence_start_when_one_is_close():
    windows = plan_windows(1000, 100, 10, [45, 70, 150, 230])
    assert windows[0].home_end == 70  # the sentence start nearest the balanced end (77) within a quarter of a home
    assert plan_windows(1000, 100, 10, [45])[0].home_end == 77  # none close: the balanced end


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 5000), st.integers(8, 300), st.integers(0, 80), st.data())
def test_windows_are_the_fewest_and_read_only_their_context(length, capacity, overlap, data):
    """Forward-pass tokens are the document's plus 2 x overlap per boundary, in the fewest windows that allow it."""
    starts = sorted(set(data.draw(st.lists(st.integers(1, max(1, length - 1)), max_size=60))))
    windows = plan_windows(length, capacity, overlap, starts)
    context = min(overlap, capacity // 4)
    assert sum(w.end - w.start for w in windows) <= length + 2 * context * (len(windows) - 1)
    fewer = len(windows) - 1  # these many windows could not hold the document with that context
    assert (
        fewer == 0
        or (capacity if fewer == 1 else 2 * (capacity - context) + (fewer - 2) * (capacity - 2 * context)) < length
    )
    homes = [w.home_end - w.home_start for w in windows]
    if len(windows) > 1 and not starts:  # balanced: no short last window
        assert max(homes) - min(homes) <= 1 + 2 * context


def test_view_count_grows_with_length_and_is_capped():
    assert snippet_count(100, 8, 64, 1023) == 8  # a paragraph keeps CAMVR's count
    assert snippet_count(64 * 20, 8, 64, 1023) == 20
    assert snippet_count(10**7, 8, 64, 1023) == 1023
    assert snippet_count(10**7, 8, None, 1023) == 8
    counts = [snippet_count(t, 8, 64, 1023) for t in range(0, 200_000, 997)]
    assert counts == sorted(counts)


@pytest.fixture(scope="module")
def narrow(tiny_backbone):
    """Snippet mode over the tiny BERT with a 32-token window, so a few sentences already need several windows."""
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


def sentences(n: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    words = ["river", "castle", "music", "winter", "bridge", "garden", "engine", "poem", "market", "storm"]
    return " ".join(f"The {rng.choice(words)} number {i} is {rng.choice(words)}." for i in range(n))


def test_every_sentence_of_a_long_document_is_in_a_view(narrow):
    text = sentences(60)
    encoded = narrow.encode_documents([text])[0]
    spans = [s for s in encoded.spans if s is not None]
    assert encoded.spans[0] is None and len(spans) == encoded.views.shape[0] - 1
    assert len(spans) > 2 * narrow.config.num_views  # far past the fixed count a paragraph gets
    assert spans[0][0] == 0 and spans[-1][1] == len(text)  # from the first character to the last
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    assert all(text[b[0] - 1] == " " for b in spans[1:])  # snippets are whole sentences
    assert np.isfinite(encoded.views).all()


def test_the_view_count_never_falls_as_a_document_grows(narrow):
    texts = [sentences(n, seed=1) for n in range(1, 80, 3)]
    counts = [d.views.shape[0] for d in narrow.encode_documents(texts)]
    assert counts == sorted(counts) and counts[-1] > counts[0]


def test_views_do_not_depend_on_the_batch_or_the_forward_passes(narrow, monkeypatch):
    from haystack_mvr.modeling import snippet_transformer

    texts = [sentences(70, seed=2), "Short one.", sentences(5, seed=3), sentences(40, seed=4)]
    alone = [narrow.encode_documents([t])[0] for t in texts]
    monkeypatch.setattr(snippet_transformer, "MIN_WINDOWS_PER_PASS", 1)  # many passes over a long document's windows
    together = narrow.encode_documents(texts, batch_size=2)
    for a, b in zip(alone, together, strict=True):
        assert a.spans == b.spans
        np.testing.assert_allclose(a.views, b.views, atol=1e-5)


@pytest.mark.parametrize("batch_size", [1, 3, 32])
def test_streamed_windows_give_the_views_of_one_whole_forward_pass(narrow, batch_size):
    """Windows pooled pass by pass (bounded memory) equal the views of the model's forward over all windows at once."""
    texts = [sentences(90, seed=5), sentences(12, seed=6), sentences(33, seed=7)]
    whole = narrow.model.encode_document(texts, batch_size=len(texts), output_value=None)
    streamed = narrow.encode_documents(texts, batch_size=batch_size)
    for item, doc in zip(whole, streamed, strict=True):
        keep = item["attention_mask"].bool()
        assert doc.views.shape[0] == int(keep.sum()) > narrow.config.num_views
        np.testing.assert_allclose(doc.views, item["token_embeddings"][keep].numpy(), rtol=1e-5, atol=1e-5)
        assert doc.spans == [None if s < 0 else (s, e) for s, e in item["mvr_spans"][keep].tolist()]


def test_a_long_document_holds_only_one_pass_of_token_states(narrow, monkeypatch):
    """The streamed path never asks the backbone for more than batch_size windows at once."""
    backbone = narrow.model[0].auto_model
    seen = []
    original = type(backbone).forward

    def counting(self, *args, **kwargs):
        seen.append(kwargs["input_ids"].shape[0])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(backbone), "forward", counting)
    narrow.encode_documents([sentences(200, seed=8)], batch_size=4)
    assert len(seen) > 10 and max(seen) == 4


def test_sentence_rows_grow_with_the_document_not_with_its_windows_times_its_sentences(narrow):
    """A document's sentence rows are spread over its window rows: the padded tensor stays linear in its length."""
    from haystack_mvr.modeling.st_features import SENTENCES, sentence_rows

    text = sentences(400, seed=9)
    features = narrow.model.preprocess([text], task="document")
    windows, per_row = features[SENTENCES].shape[0], features[SENTENCES].shape[1]
    units = [row for rows in sentence_rows(features[SENTENCES]) for row in rows]
    assert windows > 50 and len(units) >= 400
    assert per_row == -(-len(units) // windows)  # not every sentence on the first row
    assert [u[0] for u in units] == sorted(u[0] for u in units) and units[-1][1] == len(text)


def test_training_labels_name_the_view_the_forward_pass_pools_the_answer_into(narrow):
    """Snippet spans read without the backbone equal the forward pass's; a long document's answer view follows them."""
    pytest.importorskip("datasets")
    from haystack_mvr.datasets import Passage
    from haystack_mvr.modeling.encoder_inspection import snippet_spans
    from haystack_mvr.training.data import TrainingExample
    from haystack_mvr.training.st_dataset import answer_view_of, build_st_dataset
    from haystack_mvr.training.st_training import answer_snippet_spans

    texts = [sentences(n, seed=n) for n in (1, 3, 12, 45, 90)]
    encoded = narrow.encode_documents(texts)
    assert snippet_spans(narrow.model, texts) == [list(e.spans[1:]) for e in encoded]
    long_text = texts[-1]
    start = long_text.rindex("The ")  # the answer lies in the last sentence of a 90-sentence document
    example = TrainingExample(query_id="q", query="which one?", positive=Passage(id="d", title="", text=long_text))
    example = dataclasses.replace(example, answer_start=start)
    dataset = build_st_dataset(
        [example], num_negatives=0, num_snippets=2, snippet_spans=answer_snippet_spans(narrow.model)
    )
    view = dataset["answer_view"][0]
    pooled = encoded[-1].spans[view]
    assert view == len(encoded[-1].spans) - 1 and pooled[0] <= start < pooled[1]
    # Algorithm 1's fixed count (what the label assumed before) names a view that holds other text
    assert answer_view_of(long_text, start, 2) != view


def test_a_sentence_longer_than_the_window_is_cut_into_pieces_that_cover_it(narrow):
    text = "Start here. " + " ".join(f"word{i}" for i in range(300)) + " and it ends. Last one."
    encoded = narrow.encode_documents([text])[0]
    spans = [s for s in encoded.spans if s is not None]
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    assert len(spans) >= 4


def test_max_views_merges_neighbours_and_drops_no_text(tiny_backbone):
    capped = MultiVectorEncoderAdapter.snippet(
        tiny_backbone,
        device="cpu",
        num_views=2,
        doc_max_length=32,
        snippet_tokens=4,
        max_views=5,
        snippet_encoding="late_chunking",
    )
    text = sentences(50, seed=5)
    encoded = capped.encode_documents([text])[0]
    assert encoded.views.shape[0] == 5
    spans = [s for s in encoded.spans if s is not None]
    assert spans[0][0] == 0 and spans[-1][1] == len(text)


def test_a_document_that_fits_is_one_plain_forward_pass(tiny_backbone):
    """The one-window case is what sentence-transformers reads: whole-text view = mean of the row's states."""
    enc = MultiVectorEncoderAdapter.snippet(
        tiny_backbone, device="cpu", num_views=8, normalize=False, snippet_encoding="late_chunking"
    )
    text = sentences(6, seed=6)
    transformer = enc.model[0]
    row = transformer.tokenizer(text, return_tensors="pt")
    assert row["input_ids"].shape[1] <= enc.config.doc_max_length
    with torch.no_grad():
        hidden = transformer.auto_model(**row).last_hidden_state[0]
    encoded = enc.encode_documents([text])[0]
    np.testing.assert_allclose(encoded.views[0], hidden.mean(dim=0).numpy(), atol=1e-6)
    assert encoded.views.shape[0] == 7  # six sentences and the whole text


def test_the_long_document_options_are_in_the_encoder_identity(narrow, tiny_backbone):
    identity = narrow.identity("m")
    assert (identity["snippet_tokens"], identity["window_overlap"], identity["max_views"]) == (8, 4, 1024)
    other = MultiVectorEncoderAdapter.snippet(
        tiny_backbone,
        device="cpu",
        num_views=2,
        doc_max_length=32,
        snippet_tokens=16,
        window_overlap=4,
        snippet_encoding="late_chunking",
    )
    assert other.identity("m")["fingerprint"] != identity["fingerprint"]


def test_bad_long_document_options_are_clear_errors(tiny_backbone):
    for options, message in (
        ({"snippet_tokens": 0}, "snippet_tokens"),
        ({"window_overlap": -1}, "window_overlap"),
        ({"max_views": 3, "num_views": 8}, "max_views"),
    ):
        with pytest.raises(ValueError, match=message):
            MultiVectorEncoderAdapter.snippet(tiny_backbone, device="cpu", **options, snippet_encoding="late_chunking")


@pytest.mark.parametrize("mode", ["mvr", "camvr"])
def test_viewer_modes_say_what_they_cut(tiny_backbone, mode, caplog):
    from haystack_mvr.modeling.encoder_builders import viewer_encoder

    torch.manual_seed(0)
    enc = MultiVectorEncoderAdapter(viewer_encoder(tiny_backbone, mode=mode, views=3, doc_max_length=24))
    with caplog.at_level("WARNING", logger="haystack_mvr.modeling.inputs"):
        enc.encode_documents([sentences(20), "Short one.", sentences(30)], batch_size=1)
    reports = [r.getMessage() for r in caplog.records if "were cut" in r.getMessage()]
    assert len(reports) == 1 and "2 of 3 documents were cut" in reports[0]
    assert enc.identity("m")["on_truncation"] == "warn"
    strict = MultiVectorEncoderAdapter(
        viewer_encoder(tiny_backbone, mode=mode, views=3, doc_max_length=24, on_truncation="raise")
    )
    with pytest.raises(ValueError, match="on_truncation='raise'"):
        strict.encode_documents(["Short one.", sentences(20)])
    assert strict.encode_documents(["Short one."])[0].views.shape[0] == 3


def test_a_100_kb_document_is_found_by_its_last_sentence(minilm):
    """The product's promise on a real model: the whole document is read, and its last sentence can match."""
    from haystack import Document

    from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder
    from haystack_mvr.components.retrievers import MultiViewRetriever
    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
    from haystack_mvr.views import MATCHED_TEXT_KEY

    rng = random.Random(7)
    topics = ["harvest", "railway", "monastery", "glacier", "orchestra", "shipyard", "parliament", "vineyard"]
    body = " ".join(
        f"In year {1500 + i} the {rng.choice(topics)} of the valley was described in chapter {i}." for i in range(1500)
    )
    last = "The lighthouse keeper Ingrid Solberg painted the tower bright orange in 1987."
    long_text = body + " " + last
    assert len(long_text) > 100_000
    others = [Document(id=f"other-{t}", content=f"A short note about the {t} and its history.") for t in topics]
    store = FaissMultiViewDocumentStore()
    embedder = MultiViewDocumentEmbedder(model=minilm, progress_bar=False)
    documents = embedder.run([Document(id="long", content=long_text), *others])["documents"]
    store.write_documents(documents)
    query = MultiViewTextEmbedder(model=minilm).run("Who painted the lighthouse tower orange?")["embedding"]
    found = MultiViewRetriever(document_store=store, top_k=3).run(query_embedding=query)["documents"]
    assert found[0].id == "long"
    assert last in found[0].meta[MATCHED_TEXT_KEY]
    assert len(found[0].meta[MATCHED_TEXT_KEY]) < 2_000
