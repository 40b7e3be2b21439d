"""MultiViewContextBuilder: pieces of the upstream documents, chosen by their views, within a token budget.

Every stored document here is built from sentences of four default tokens each (``"Aa3 one two."``: three words and
a period) and views ``[score, 0]``, so that against the query ``[1, 0]`` each view scores what the test names and
the pieces each policy step takes are known exactly.
"""

from __future__ import annotations

import itertools
import logging
import random

import numpy as np
import pytest
from haystack import Document, Pipeline
from haystack.components.builders import ChatPromptBuilder
from haystack.dataclasses import ChatMessage
from haystack.utils import ComponentDevice

from haystack_mvr.components.builders import (
    PIECE_TOKENS_KEY,
    SOURCE_ID_KEY,
    SOURCE_SPAN_KEY,
    MultiViewContextBuilder,
)
from haystack_mvr.components.builders.context_selection import Candidate, select_pieces
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.modeling.sentence_splitting import sentence_spans
from haystack_mvr.token_budget import WORD_PATTERN, WordCounter
from haystack_mvr.views import (
    ENCODER_KEY,
    MATCHED_SCOPE_KEY,
    MATCHED_SPAN_KEY,
    MATCHED_TEXT_KEY,
    MATCHED_VIEW_KEY,
    PackedViews,
)

QUERY = [1.0, 0.0]


def sentence(doc_id: str, i: int) -> str:
    return f"{doc_id.capitalize()}a{i} one two."


def content(doc_id: str, n: int) -> str:
    return " ".join(sentence(doc_id, i) for i in range(n))


def char_span(doc_id: str, a: int, b: int) -> tuple[int, int]:
    """Character span of sentences ``a..b`` (inclusive) in ``content(doc_id, n)``: every sentence is as long."""
    width = len(sentence(doc_id, 0)) + 1  # sentence numbers stay one digit
    return a * width, (b + 1) * width - 1


def stored(doc_id: str, n: int, views: dict, *, document_score: float = 0.0, **meta) -> Document:
    """A document of ``n`` sentences; ``views`` maps a sentence ``i`` or a range ``(a, b)`` to its view's score;
    view 0 is the whole-document view."""
    text = content(doc_id, n)
    assert len(sentence_spans(text)) == n
    spans, scores = [None], [document_score]
    for where, score in views.items():
        a, b = (where, where) if isinstance(where, int) else where
        spans.append(list(char_span(doc_id, a, b)))
        scores.append(score)
    matrix = np.array([[s, 0.0] for s in scores], dtype=np.float32)
    return Document(id=doc_id, content=text, meta={**meta, "mvr_views": matrix, "mvr_view_spans": spans})


def faiss_store(*documents: Document) -> FaissMultiViewDocumentStore:
    store = FaissMultiViewDocumentStore(index_factory="Flat")
    store.write_documents(list(documents))
    return store


def upstream(*ids: str) -> list[Document]:
    """Candidates as a retriever or BM25 gives them: only the ids matter."""
    return [Document(id=i, content="upstream copy") for i in ids]


def pieces(documents: list[Document]) -> list[tuple[str, str]]:
    return [(d.id, d.content) for d in documents]


def expected(*runs: tuple[str, int, int]) -> list[tuple[str, str]]:
    """``(id, content)`` of the pieces of sentences ``a..b`` of each ``(doc_id, a, b)``."""
    out = []
    for doc_id, a, b in runs:
        start, end = char_span(doc_id, a, b)
        out.append((f"{doc_id}#{start}-{end}", " ".join(sentence(doc_id, i) for i in range(a, b + 1))))
    return out


def build(store, **kwargs) -> MultiViewContextBuilder:
    """A builder whose seeds follow the views alone (``upstream_weight=0``) unless a test says otherwise: the view
    policy is what most tests pin; ``test_upstream_weight...`` pins the upstream's part."""
    defaults = {"whole_document_if_fits": False, "upstream_weight": 0.0}
    return MultiViewContextBuilder(document_store=store, **{**defaults, **kwargs})


@pytest.fixture
def two_documents():
    a = stored("a", 5, {0: 0.1, 1: 0.2, 2: 0.3, 3: 0.2, 4: 0.1}, k=1)
    b = stored("b", 5, {0: 0.1, 1: 0.1, 2: 0.9, 3: 0.1, 4: 0.1}, k=2)
    return faiss_store(a, b)


@pytest.mark.parametrize(
    ("budget", "runs"),
    [(8, [("b", 2, 2), ("a", 2, 2)]), (12, [("b", 2, 2), ("a", 1, 2)])],
)
def test_best_views_first_across_documents(two_documents, budget, runs):
    """b is second upstream (found only by BM25, say) but holds the best view: its piece comes first. With 12
    tokens a's next-best seed touches a's piece and extends it (new text only)."""
    builder = build(two_documents, budget_tokens=budget, piece_tokens=4)
    out = builder.run(upstream("a", "b"), query_embedding=QUERY)["documents"]
    assert pieces(out) == expected(*runs)
    assert [d.score for d in out] == pytest.approx([0.9, 0.3])
    assert sum(d.meta[PIECE_TOKENS_KEY] for d in out) == budget


def test_output_documents_carry_the_source_and_the_matched_view(two_documents):
    out = build(two_documents, budget_tokens=12, piece_tokens=4).run(upstream("a", "b"), query_embedding=QUERY)
    a_piece = out["documents"][1]
    start, end = char_span("a", 1, 2)
    assert a_piece.meta == {
        "k": 1,
        SOURCE_ID_KEY: "a",
        SOURCE_SPAN_KEY: [start, end],
        MATCHED_VIEW_KEY: 3,  # view 0 is the whole document, then sentences 0, 1, 2 ...
        MATCHED_SCOPE_KEY: "snippet",
        MATCHED_SPAN_KEY: list(char_span("a", 2, 2)),
        MATCHED_TEXT_KEY: sentence("a", 2),
        PIECE_TOKENS_KEY: 8,
    }
    assert a_piece.content == content("a", 5)[start:end] and a_piece.id == f"a#{start}-{end}"


@pytest.mark.parametrize(
    ("seed", "budget", "piece_tokens", "run"),
    [
        (3, 12, 12, (2, 4)),  # the next sentence first, then the one before
        (3, 16, 8, (2, 5)),  # up to piece_tokens, then the leftover shared, still alternating
        (6, 12, 12, (4, 6)),  # the last sentence grows backwards only
        (0, 8, 4, (0, 1)),
    ],
)
def test_growth_by_whole_sentences_on_both_sides(seed, budget, piece_tokens, run):
    store = faiss_store(stored("g", 7, {seed: 0.9}))
    out = build(store, budget_tokens=budget, piece_tokens=piece_tokens).run(upstream("g"), query_embedding=QUERY)
    assert pieces(out["documents"]) == expected(("g", *run))


def test_growth_round_robin_in_score_order_merges_pieces_that_touch():
    """Two seeds of one document with one sentence between them: the better piece grows into it, and the two
    pieces become one (the sentence between is not repeated, the score is the best view's)."""
    store = faiss_store(stored("m", 7, {1: 0.9, 3: 0.8}))
    out = build(store, budget_tokens=12, piece_tokens=4).run(upstream("m"), query_embedding=QUERY)["documents"]
    assert pieces(out) == expected(("m", 1, 3))
    assert out[0].score == pytest.approx(0.9) and out[0].meta[MATCHED_VIEW_KEY] == 1
    assert out[0].meta[PIECE_TOKENS_KEY] == 12


def test_overlapping_seeds_merge_and_count_new_text_only():
    """A snippet over sentences 2-3 overlaps the best one (sentence 3): only sentence 2 is new."""
    store = faiss_store(stored("o", 5, {3: 0.9, (2, 3): 0.7}))
    out = build(store, budget_tokens=8, piece_tokens=4).run(upstream("o"), query_embedding=QUERY)["documents"]
    assert pieces(out) == expected(("o", 2, 3))
    assert out[0].meta[PIECE_TOKENS_KEY] == 8 and out[0].meta[MATCHED_VIEW_KEY] == 1


@pytest.fixture
def three_documents():
    return faiss_store(
        *(stored(i, 5, {0: 0.1, 1: 0.1, 2: s, 3: 0.1, 4: 0.1}) for i, s in zip("abc", [0.9, 0.8, 0.7], strict=True))
    )


def test_whole_document_when_it_fits(three_documents):
    """a and b (20 tokens each) fit the budget not yet reserved: each is taken whole, and c has no room left."""
    builder = build(three_documents, budget_tokens=40, piece_tokens=4, whole_document_if_fits=True)
    out = builder.run(upstream("a", "b", "c"), query_embedding=QUERY)["documents"]
    assert pieces(out) == expected(("a", 0, 4), ("b", 0, 4))
    assert out[0].content == content("a", 5) and out[0].meta[SOURCE_SPAN_KEY] == [0, len(content("a", 5))]


def test_without_whole_documents_seeds_go_by_score(three_documents):
    """Seeds a2, b2, c2, then the 0.1 views by upstream rank and position, each extending its piece."""
    builder = build(three_documents, budget_tokens=40, piece_tokens=4)
    out = builder.run(upstream("a", "b", "c"), query_embedding=QUERY)["documents"]
    assert pieces(out) == expected(("a", 0, 4), ("b", 0, 3), ("c", 2, 2))


@pytest.mark.parametrize(
    ("max_pieces", "runs"),
    [(1, [("a", 0, 1), ("b", 1, 2)]), (None, [("a", 0, 0), ("a", 4, 4), ("a", 2, 2), ("b", 1, 1)])],
)
def test_max_pieces_per_document(max_pieces, runs):
    store = faiss_store(stored("a", 7, {0: 0.9, 4: 0.8, 2: 0.7}), stored("b", 5, {1: 0.5}))
    builder = build(store, budget_tokens=16, piece_tokens=4, max_pieces_per_document=max_pieces)
    assert pieces(builder.run(upstream("a", "b"), query_embedding=QUERY)["documents"]) == expected(*runs)


@pytest.mark.parametrize(
    ("order", "runs"),
    [("score", [("a", 3, 3), ("b", 2, 2), ("a", 0, 0)]), ("document", [("a", 0, 0), ("a", 3, 3), ("b", 2, 2)])],
)
def test_order(order, runs):
    store = faiss_store(stored("a", 5, {3: 0.9, 0: 0.5}), stored("b", 5, {2: 0.7}))
    builder = build(store, budget_tokens=12, piece_tokens=4, order=order)
    assert pieces(builder.run(upstream("a", "b"), query_embedding=QUERY)["documents"]) == expected(*runs)
    if order == "document":  # a repeated candidate keeps its first rank
        assert pieces(builder.run(upstream("a", "b", "a"), query_embedding=QUERY)["documents"]) == expected(*runs)
        assert pieces(builder.run(upstream("b", "a", "b"), query_embedding=QUERY)["documents"]) == expected(
            *runs[2:], *runs[:2]
        )


def test_a_best_seed_over_the_budget_is_cut():
    """A seed of three sentences (12 tokens) and a budget of 9: its first two sentences. Budget 2: its first
    sentence cut after two tokens (the only piece that is not whole sentences)."""
    store = faiss_store(stored("c", 5, {(1, 3): 0.9, 4: 0.5}))
    builder = build(store, budget_tokens=9, piece_tokens=4)
    assert pieces(builder.run(upstream("c"), query_embedding=QUERY)["documents"]) == expected(("c", 1, 2))
    out = builder.run(upstream("c"), query_embedding=QUERY, budget_tokens=2)["documents"]
    start = char_span("c", 1, 1)[0]
    assert pieces(out) == [(f"c#{start}-{start + 7}", "Ca1 one")]
    assert out[0].meta[PIECE_TOKENS_KEY] == 2 and out[0].meta[MATCHED_TEXT_KEY] == content("c", 5)[start:][:38]


def _check_pieces(out: list[Document], sources: dict[str, str], budget: int, count) -> None:
    """Within budget (by the counter, whole pieces), exact substrings, whole sentences, nothing repeated."""
    assert sum(count(d.content) for d in out) <= budget
    by_source: dict[str, list[tuple[int, int]]] = {}
    for d in out:
        assert d.meta[PIECE_TOKENS_KEY] == count(d.content)
        source = d.meta[SOURCE_ID_KEY]
        start, end = d.meta[SOURCE_SPAN_KEY]
        assert d.content == sources[source][start:end] and d.id == f"{source}#{start}-{end}"
        by_source.setdefault(source, []).append((start, end))
    for source, spans in by_source.items():
        sentences = sentence_spans(sources[source])
        starts, ends = {s for s, _ in sentences}, {e for _, e in sentences}
        spans.sort()
        if len(out) > 1:
            assert all(s in starts and e in ends for s, e in spans)
        for (_, end), (start, _) in itertools.pairwise(spans):  # apart, with a whole sentence between
            assert any(end < s and e < start for s, e in sentences)


def test_budget_never_exceeded_and_nothing_repeated_on_random_inputs():
    rng = random.Random(0)
    words = ["Rivers", "flow", "north", "and", "the", "city", "of", "Warsaw", "lies", "on", "Vistula", "banks"]
    documents, sources = [], {}
    for doc_id in "pqrs":
        sentences = [
            " ".join(rng.choice(words) for _ in range(rng.randint(1, 9))).capitalize() + "."
            for _ in range(rng.randint(1, 9))
        ]
        text = " ".join(sentences)
        spans = sentence_spans(text)
        groups, i = [], 0
        while i < len(spans):
            j = min(i + rng.randint(0, 2), len(spans) - 1)
            groups.append([spans[i][0], spans[j][1]])
            i = j + 1
        views = np.array([[rng.random(), 0.0] for _ in range(len(groups) + 1)], dtype=np.float32)
        documents.append(
            Document(id=doc_id, content=text, meta={"mvr_views": views, "mvr_view_spans": [None, *groups]})
        )
        sources[doc_id] = text
    store = faiss_store(*documents)

    def count(text: str) -> int:
        return len(WORD_PATTERN.findall(text))

    for _ in range(150):
        builder = MultiViewContextBuilder(
            document_store=store,
            budget_tokens=rng.randint(1, 80),
            piece_tokens=rng.randint(1, 24),
            max_pieces_per_document=rng.choice([None, 1, 2]),
            whole_document_if_fits=rng.random() < 0.5,
        )
        order = rng.sample("pqrs", 4)
        out = builder.run(upstream(*order), query_embedding=QUERY)["documents"]
        assert out
        _check_pieces(out, sources, builder.budget_tokens, count)
        if builder.max_pieces_per_document:
            ids = [d.meta[SOURCE_ID_KEY] for d in out]
            assert max(ids.count(i) for i in ids) <= builder.max_pieces_per_document


class _JoinCostsCounter(WordCounter):
    """Words, plus one token for each sentence join: a piece's whole count exceeds the sum of its sentences'."""

    def count(self, texts):
        return [n + t.count(". ") for n, t in zip(super().count(texts), texts, strict=True)]


def test_whole_piece_counts_over_the_budget_give_back_the_last_grown_sentence():
    """Bookkeeping sums sentences: 2, 3 then 1 fill 12 tokens, but the whole piece counts 14: sentence 1, the last
    grown, is given back (9 tokens)."""
    text = content("t", 5)
    candidate = Candidate(text, [0.0, 0.9], [None, char_span("t", 2, 2)])
    out = select_pieces([candidate], budget=12, piece_tokens=12, split=sentence_spans, counter=_JoinCostsCounter())
    start, end = char_span("t", 2, 3)
    assert [(p.start, p.end, p.tokens, p.view) for p in out] == [(start, end, 9, 1)]


def test_a_single_seed_over_the_budget_by_its_whole_count_keeps_its_first_sentences():
    """Sentences 1-3 sum to the budget (12) but count 14 as one text: the seed keeps sentences 1-2 (9 tokens)."""
    candidate = Candidate(content("t", 5), [0.0, 0.9], [None, char_span("t", 1, 3)])
    out = select_pieces([candidate], budget=12, piece_tokens=4, split=sentence_spans, counter=_JoinCostsCounter())
    start, end = char_span("t", 1, 2)
    assert [(p.start, p.end, p.tokens, p.view) for p in out] == [(start, end, 9, 1)]


def test_budget_with_a_real_tokenizer(minilm):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(minilm))
    text = (
        "Warsaw is the capital of Poland. It lies on the Vistula, a river of 1,047 kilometres. Its old town was "
        "rebuilt after 1945 from paintings by Bernardo Bellotto. Kraków was the capital until 1596."
    )
    spans = sentence_spans(text)
    views = np.array([[0.1, 0.0], [0.3, 0.0], [0.9, 0.0], [0.2, 0.0], [0.4, 0.0]], dtype=np.float32)
    store = faiss_store(
        Document(id="w", content=text, meta={"mvr_views": views, "mvr_view_spans": [None, *map(list, spans)]})
    )

    def count(t: str) -> int:
        return len(tokenizer(t, add_special_tokens=False)["input_ids"])

    assert [count(text[s:e]) for s, e in spans] == [7, 16, 14, 8]  # WordPiece tokens; 45 for the whole text
    best, last = text[slice(*spans[1])], text[slice(*spans[3])]
    cases = {
        3: ["It lies on"],  # the best sentence cut at a token boundary
        15: [best[:-1]],
        16: [best],
        30: [best, last],  # 6 tokens left: neither neighbour (7, 14 tokens) fits
        45: [text],
        200: [text],
    }
    for budget, contents in cases.items():
        builder = build(store, budget_tokens=budget, tokenizer=str(minilm), piece_tokens=8)
        out = builder.run(upstream("w"), query_embedding=QUERY)["documents"]
        assert [d.content for d in out] == contents
        _check_pieces(out, {"w": text}, budget, count)


@pytest.mark.parametrize("budget", [0, -1, True, 2.5, "8"])
def test_budget_must_be_a_positive_integer(two_documents, budget):
    with pytest.raises(ValueError, match="budget_tokens must be a positive integer"):
        MultiViewContextBuilder(document_store=two_documents, budget_tokens=budget)
    builder = MultiViewContextBuilder(document_store=two_documents)
    with pytest.raises(ValueError, match="budget_tokens must be a positive integer"):
        builder.run(upstream("a"), query_embedding=QUERY, budget_tokens=budget)


def test_bad_inputs(two_documents):
    with pytest.raises(ValueError, match="multi-view document store"):
        MultiViewContextBuilder(document_store="not a store")
    with pytest.raises(ValueError, match="order must be one of"):
        MultiViewContextBuilder(document_store=two_documents, order="rank")
    for name in ("piece_tokens", "max_pieces_per_document"):
        with pytest.raises(ValueError, match=f"{name} must be a positive integer"):
            MultiViewContextBuilder(document_store=two_documents, **{name: 0})
    builder = MultiViewContextBuilder(document_store=two_documents)
    packed = PackedViews(np.array([QUERY]))
    with pytest.raises(ValueError, match=r"exactly one of query_embedding .* got both"):
        builder.run(upstream("a"), query_embedding=QUERY, packed_query_embedding=packed)
    with pytest.raises(ValueError, match="got neither"):
        builder.run(upstream("a"))


def test_packed_query_and_encoder_check():
    document = stored("e", 3, {1: 0.9})
    document.meta[ENCODER_KEY] = {"model": "m", "mode": "snippet"}
    store = faiss_store(document)
    builder = build(store, budget_tokens=4)
    packed = PackedViews(np.array([QUERY]))
    out = builder.run(upstream("e"), packed_query_embedding=packed, encoder={"model": "other/path", "mode": "snippet"})
    assert pieces(out["documents"]) == pieces(builder.run(upstream("e"), query_embedding=QUERY)["documents"])
    assert pieces(out["documents"]) == expected(("e", 1, 1))
    with pytest.raises(ValueError, match="differ in \\['mode'\\]"):
        builder.run(upstream("e"), query_embedding=QUERY, encoder={"model": "m", "mode": "mvr"})


def test_candidates_the_store_lacks_are_skipped_and_logged(caplog):
    no_spans = Document(id="n", content="Na0 one two.", meta={"mvr_views": np.array([[0.9, 0.0]], dtype=np.float32)})
    store = faiss_store(stored("a", 3, {1: 0.5}), no_spans)
    builder = build(store, budget_tokens=4)
    with caplog.at_level(logging.WARNING):
        out = builder.run(upstream("missing", "n", "a", "a"), query_embedding=QUERY)["documents"]
    assert pieces(out) == expected(("a", 1, 1))
    assert "does not hold" in caplog.text and "'missing'" in caplog.text
    assert "without snippet spans" in caplog.text and "['n']" in caplog.text
    assert builder.run([], query_embedding=QUERY) == {"documents": []}
    assert builder.run(upstream("missing"), query_embedding=QUERY) == {"documents": []}


@pytest.mark.asyncio
async def test_run_async(two_documents):
    builder = build(two_documents, budget_tokens=12, piece_tokens=4)
    out = await builder.run_async(upstream("a", "b"), query_embedding=QUERY)
    assert pieces(out["documents"]) == expected(("b", 2, 2), ("a", 1, 2))


def test_to_dict_from_dict_and_yaml(two_documents):
    builder = MultiViewContextBuilder(
        document_store=two_documents,
        budget_tokens=100,
        tokenizer="some/tokenizer",
        tokenizer_kwargs={"gguf_file": "m.gguf"},
        piece_tokens=32,
        max_pieces_per_document=2,
        order="document",
        whole_document_if_fits=False,
        upstream_weight=0.5,
    )
    data = builder.to_dict()
    assert data == {
        "type": "haystack_mvr.components.builders.multi_view_context_builder.MultiViewContextBuilder",
        "init_parameters": {
            "document_store": two_documents.to_dict(),
            "budget_tokens": 100,
            "tokenizer": "some/tokenizer",
            "tokenizer_kwargs": {"gguf_file": "m.gguf"},
            "piece_tokens": 32,
            "max_pieces_per_document": 2,
            "order": "document",
            "whole_document_if_fits": False,
            "upstream_weight": 0.5,
        },
    }
    again = MultiViewContextBuilder.from_dict(data)
    assert isinstance(again.document_store, FaissMultiViewDocumentStore)
    assert again.to_dict() == data
    pipeline = Pipeline()
    pipeline.add_component("context", builder)
    loaded = Pipeline.loads(pipeline.dumps())
    assert loaded.to_dict() == pipeline.to_dict()
    assert isinstance(loaded.get_component("context"), MultiViewContextBuilder)


@pytest.fixture
def mixed_documents() -> list[Document]:
    return [
        stored("a", 7, {0: 0.9, 4: 0.8, 2: 0.7}, k=1),
        stored("b", 5, {1: 0.5, (2, 3): 0.6}, k=2),
        stored("c", 3, {0: 0.1, 1: 0.2, 2: 0.3}),
    ]


def test_budget_a_piece_cannot_grow_into_goes_to_the_seeds_passed_over(mixed_documents):
    """piece_tokens=128 over a budget of 60: a0's piece reserves all of it and no other seed is taken, but a has
    only 28 tokens. Once a is whole, the seeds passed over get another pass: b (20 tokens), then c (12)."""
    builder = build(faiss_store(*mixed_documents), budget_tokens=60)
    out = builder.run(upstream("c", "b", "a"), query_embedding=QUERY)["documents"]
    assert pieces(out) == expected(("a", 0, 6), ("b", 0, 4), ("c", 0, 2))


def test_same_pieces_on_qdrant(mixed_documents):
    pytest.importorskip("qdrant_client")
    from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore

    qdrant = QdrantMultiViewDocumentStore(location=":memory:")
    qdrant.write_documents(mixed_documents)
    faiss = faiss_store(*mixed_documents)
    cases = [
        ({"budget_tokens": 30, "piece_tokens": 4}, [("a", 0, 0), ("a", 4, 4), ("a", 2, 2), ("b", 1, 3), ("c", 2, 2)]),
        ({"budget_tokens": 60, "order": "document"}, [("c", 0, 2), ("b", 0, 4), ("a", 0, 6)]),
    ]
    for kwargs, runs in cases:
        results = []
        for store in (faiss, qdrant):
            out = build(store, **kwargs).run(upstream("c", "missing", "b", "a"), query_embedding=QUERY)["documents"]
            results.append([(d.id, d.content, d.score, d.meta) for d in out])
        assert results[0] == results[1]
        assert [(i, c) for i, c, _, _ in results[0]] == expected(*runs)


def test_pieces_render_in_a_chat_prompt(two_documents):
    pipeline = Pipeline()
    pipeline.add_component("context", build(two_documents, budget_tokens=12, piece_tokens=4))
    template = [ChatMessage.from_user("{% for d in documents %}[{{ d.content }}]{% endfor %}")]
    pipeline.add_component("prompt", ChatPromptBuilder(template=template, required_variables=["documents"]))
    pipeline.connect("context.documents", "prompt.documents")
    result = pipeline.run({"context": {"documents": upstream("a", "b"), "query_embedding": QUERY}})
    text = result["prompt"]["prompt"][0].text
    assert text == "".join(f"[{c}]" for _, c in expected(("b", 2, 2), ("a", 1, 2)))


def test_readers_take_the_pieces(two_documents, tiny_t5, tiny_extractive_reader):
    from haystack_integrations.components.readers.transformers import TransformersExtractiveReader

    from haystack_mvr.components.readers import FusionInDecoderReader

    out = build(two_documents, budget_tokens=12, piece_tokens=4).run(upstream("a", "b"), query_embedding=QUERY)
    ids = {d.id for d in out["documents"]}
    fid = FusionInDecoderReader(
        model=str(tiny_t5), device=ComponentDevice.from_str("cpu"), context="document", max_answer_length=2
    )
    fid.warm_up()
    answers = fid.run(query="Which?", documents=out["documents"])["answers"]
    assert answers and {d.id for d in answers[0].documents} == ids
    extractive = TransformersExtractiveReader(
        model=str(tiny_extractive_reader), device=ComponentDevice.from_str("cpu"), top_k=2, no_answer=False
    )
    extractive.warm_up()
    answers = extractive.run(query="Which?", documents=out["documents"])["answers"]
    assert answers and all(a.document.id in ids and a.data in a.document.content for a in answers)


@pytest.mark.integration
def test_with_minilm_end_to_end(minilm):
    from haystack.components.writers import DocumentWriter

    from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder

    documents = [
        Document(id="w", content="Warsaw is the capital of Poland. It lies on the Vistula. Its old town was rebuilt."),
        Document(id="k", content="Kraków was the capital of Poland until 1596. The Wawel castle stands above it."),
        Document(id="g", content="Gdańsk is a port on the Baltic Sea. Its shipyard gave birth to Solidarity."),
    ]
    store = FaissMultiViewDocumentStore(index_factory="Flat")
    indexing = Pipeline()
    indexing.add_component("embedder", MultiViewDocumentEmbedder(model=str(minilm)))
    indexing.add_component("writer", DocumentWriter(document_store=store))
    indexing.connect("embedder.documents", "writer.documents")
    indexing.run({"embedder": {"documents": documents}})

    querying = Pipeline()
    querying.add_component("query_embedder", MultiViewTextEmbedder(model=str(minilm)))
    # the upstream order here is reversed on purpose and carries no scores: upstream_weight=0 lets the views alone
    # order the seeds (the default 1.0 would rank Gdańsk's sentences first, as an upstream ranking it first asks)
    querying.add_component(
        "context",
        MultiViewContextBuilder(document_store=store, budget_tokens=12, tokenizer=str(minilm), upstream_weight=0.0),
    )
    querying.connect("query_embedder.packed_embedding", "context.packed_query_embedding")
    querying.connect("query_embedder.encoder", "context.encoder")
    result = querying.run(
        {"query_embedder": {"text": "Which river flows through Warsaw?"}, "context": {"documents": documents[::-1]}}
    )
    out = result["context"]["documents"]
    assert out[0].content == "It lies on the Vistula." and out[0].meta[SOURCE_ID_KEY] == "w"
    assert sum(d.meta[PIECE_TOKENS_KEY] for d in out) <= 12


def test_upstream_weight_lets_the_upstream_ranking_order_the_seeds():
    """The upstream (a hybrid) ranks ``a`` first though ``b`` holds the best view: with ``upstream_weight`` its rank
    outweighs the views' difference, without it the best view wins; each budget holds one 4-token sentence."""
    store = faiss_store(stored("a", 3, {1: 0.5}), stored("b", 3, {1: 0.6}))
    upstream = [
        Document(id="a", content=content("a", 3), score=2.0),
        Document(id="b", content=content("b", 3), score=1.0),
    ]

    def first(weight: float) -> str:
        builder = MultiViewContextBuilder(document_store=store, budget_tokens=4, piece_tokens=4, upstream_weight=weight)
        return builder.run(documents=upstream, query_embedding=QUERY)["documents"][0].content

    assert first(0.0) == sentence("b", 1)
    assert first(0.05) == sentence("b", 1)  # 0.5 + 0.05 < 0.6
    assert first(0.2) == sentence("a", 1)  # 0.5 + 0.2 > 0.6
    unscored = [Document(id=d.id, content=d.content) for d in upstream]  # no scores: by rank
    builder = MultiViewContextBuilder(document_store=store, budget_tokens=4, piece_tokens=4, upstream_weight=0.2)
    assert builder.run(documents=unscored, query_embedding=QUERY)["documents"][0].content == sentence("a", 1)
    for bad in (-1, True, "1"):
        with pytest.raises(ValueError, match="upstream_weight"):
            MultiViewContextBuilder(document_store=store, upstream_weight=bad)


@pytest.mark.parametrize("joiner", [" ", "、", "\n"])
def test_text_without_sentence_ends_is_cut_where_its_views_are(joiner):
    """A transcript, scraped text or CJK without 。 is one "sentence": the piece starts at the matched view and holds
    it, not the document's first tokens (issue 48)."""
    words = [f"w{i}" for i in range(600)]
    text = joiner.join(words)
    assert len(sentence_spans(text)) == 1
    starts = [text.index(f"w{i}{joiner}") if i < 599 else text.index("w599") for i in range(0, 600, 60)]
    spans = [None, *([s, e - len(joiner)] for s, e in zip(starts, [*starts[1:], len(text) + len(joiner)], strict=True))]
    scores = [0.0] + [0.1] * len(starts)
    scores[6] = 0.9  # the view of words 300-359
    matrix = np.array([[s, 0.0] for s in scores], dtype=np.float32)
    store = faiss_store(Document(id="t", content=text, meta={"mvr_views": matrix, "mvr_view_spans": spans}))
    for budget in (20, 300):
        out = build(store, budget_tokens=budget, piece_tokens=16).run(upstream("t"), query_embedding=QUERY)
        best = out["documents"][0]
        start, end = best.meta[SOURCE_SPAN_KEY]
        assert best.meta[MATCHED_VIEW_KEY] == 6 and text[start:end] == best.content
        if budget == 20:  # the view does not fit: its own first tokens
            assert start == spans[6][0] and best.content.startswith("w300"), best.content
        else:  # the whole view, grown by its neighbours
            assert start <= spans[6][0] and spans[6][1] <= end, (start, end, spans[6])
        assert not best.content.startswith("w0" + joiner)  # never the document's first tokens


@pytest.mark.parametrize("weight", [float("nan"), float("inf"), -1.0, True])
def test_upstream_weight_must_be_finite_and_not_negative(weight):
    with pytest.raises(ValueError, match="upstream_weight must be a finite number"):
        MultiViewContextBuilder(document_store=faiss_store(stored("a", 2, {0: 0.5})), upstream_weight=weight)


@pytest.mark.parametrize("tokenizer", ["some-org/a-tokenizer-never-cached", "runs/no-such-tokenizer-folder"])
def test_a_tokenizer_that_cannot_load_here_is_named_at_warm_up(two_documents, monkeypatch, tokenizer):
    from haystack_mvr.modeling.loading import ModelNotFoundError

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    builder = build(two_documents, budget_tokens=12, tokenizer=tokenizer)
    with pytest.raises(ModelNotFoundError) as error:
        builder.warm_up()
    message = str(error.value)
    assert tokenizer in message and "MultiViewContextBuilder" in message and "tokenizer" in message


def test_a_splitters_fragments_join_the_sentence_before_them():
    from haystack_mvr.components.builders.context_selection import whole_clauses

    text = "The safety was T. J. Ward. He intercepted two passes. :79 An observer noted: the game was close."
    cut = [(0, 20), (21, 26), (27, 52), (53, 73), (74, 96)]  # what a splitter may give: "Ward." and ":79 An ..."
    assert [text[s:e] for s, e in cut][1] == "Ward."
    # ":79 An observer noted:" joined too, and "the game was close." (lower case in cased text: mid-sentence)
    assert whole_clauses(text, cut) == [(0, 26), (27, 96)]
    assert whole_clauses(text, [(0, 4), (5, 52)]) == [(0, 52)]  # a fragment first joins the next sentence
    assert whole_clauses(text, [(0, 26), (27, 52)]) == [(0, 26), (27, 52)]  # whole sentences stay as they are
