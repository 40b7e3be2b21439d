"""A splitter's fragments ("Ward." of "T. J. Ward.", ":79 An observer noted:") never become pieces of their own, nor
the start of one, even where the encoder made them views of their own (its snippets come from the same splitter)."""

from __future__ import annotations

import numpy as np
import pytest
from haystack import Document

from haystack_mvr.components.builders import MultiViewContextBuilder
from haystack_mvr.components.builders.context_selection import Candidate, select_pieces, whole_clauses
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.modeling.sentence_splitting import sentence_spans
from haystack_mvr.views import attach_views

TEXT = (
    "Denver's defence starred in the game. The best safety was T. J. Ward. He intercepted two passes in the second "
    "half. The crowd was loud at 3:79 An observer noted: the game was close. It ended late in the evening."
)


def fragmentary_split(text: str) -> list[tuple[int, int]]:
    """What a splitter may give for TEXT: 'Ward.' and ':79 An observer noted:' cut off the sentences they end."""
    cuts = ["Denver's defence starred in the game.", "The best safety was T. J.", "Ward."]
    cuts += ["He intercepted two passes in the second half.", "The crowd was loud at 3"]
    cuts += [":79 An observer noted:", "the game was close.", "It ended late in the evening."]
    spans, start = [], 0
    for cut in cuts:
        start = text.index(cut, start)
        spans.append((start, start + len(cut)))
        start += len(cut)
    return spans


CLAUSE_STARTS = {start for start, _ in whole_clauses(TEXT, fragmentary_split(TEXT))}


@pytest.mark.parametrize("budget", [6, 12, 20, 40])
def test_a_fragment_view_seeds_its_whole_clause(budget):
    spans = fragmentary_split(TEXT)
    for seed in range(len(spans)):  # each view in turn the best
        scores = [1.0 if v == seed else 0.1 * v for v in range(len(spans))]
        pieces = select_pieces([Candidate(TEXT, scores, spans)], budget=budget, piece_tokens=4, split=fragmentary_split)
        texts = [TEXT[p.start : p.end] for p in pieces]
        assert all(p.start in CLAUSE_STARTS for p in pieces if p.end - p.start > 0), (seed, texts)
        assert "Ward." not in texts and not any(t.startswith((":", "Ward.")) for t in texts), (seed, texts)


def test_the_builder_on_views_cut_by_its_own_splitter_gives_no_fragment_piece():
    spans = sentence_spans(TEXT)
    if "Ward." not in [TEXT[a:b] for a, b in spans]:
        pytest.skip("this sentence splitter keeps 'T. J. Ward.' whole")
    views = np.eye(len(spans) + 1, dtype=np.float32)
    store = FaissMultiViewDocumentStore(index_factory="Flat")
    store.write_documents([attach_views(Document(id="d", content=TEXT), views, [None, *spans])])
    for k in range(1, len(spans) + 1):
        query = [0.0] * (len(spans) + 1)
        query[k] = 1.0
        for budget in (6, 12, 30):
            builder = MultiViewContextBuilder(
                document_store=store, budget_tokens=budget, piece_tokens=1, whole_document_if_fits=False
            )
            pieces = builder.run(documents=[Document(id="d", content=TEXT, score=1.0)], query_embedding=query)
            texts = [p.content for p in pieces["documents"]]
            assert "Ward." not in texts and not any(t.startswith(("Ward.", ":")) for t in texts), (k, budget, texts)


def test_a_lower_case_start_in_cased_text_is_mid_sentence_and_joins_the_sentence_before():
    text = "The rate was approx. twenty percent of the total in that year. It rose later in the decade."
    cut = [(0, 20), (21, 62), (63, 91)]  # Punkt may end a sentence at "approx."
    assert [text[a:b] for a, b in cut][1].startswith("twenty")
    assert whole_clauses(text, cut) == [(0, 62), (63, 91)]


def test_lower_case_text_keeps_its_sentences():
    text = "the rate rose in that year. it fell later in the decade. then it rose again for good."
    cut = [(0, 27), (28, 56), (57, 85)]
    assert [text[a:b] for a, b in cut][-1] == "then it rose again for good."
    assert whole_clauses(text, cut) == cut


def test_a_sentence_cut_inside_brackets_is_joined_again():
    text = "Some used their native language (i.e. Mongolian) and the 'Phags-pa script. Others learned Chinese well."
    cut = spans_of(text, ["Some used their native language (i.e.", "Mongolian) and the 'Phags-pa script."])
    cut += spans_of(text, ["Others learned Chinese well."])  # Punkt ends a sentence at "(i.e."
    assert whole_clauses(text, cut) == [(cut[0][0], cut[1][1]), cut[2]]
    balanced = "It rose (as planned). Then it fell again. After that it rose (twice) once more"
    spans = spans_of(balanced, ["It rose (as planned).", "Then it fell again.", "After that it rose (twice) once more"])
    assert whole_clauses(balanced, spans) == spans


def spans_of(text: str, sentences: list[str]) -> list[tuple[int, int]]:
    return [(text.index(s), text.index(s) + len(s)) for s in sentences]
