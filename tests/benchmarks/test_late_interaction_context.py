"""The late-interaction context benchmark's own logic (the builder's pieces on token views are tested in
tests/components/test_late_interaction_pipeline.py)."""

from __future__ import annotations

from benchmarks.late_interaction_context import sample, sentence_aligned


def test_sample_is_rag_contexts_seeded_draw_and_nests():
    assert sample(5, None) == sample(5, 9) == [0, 1, 2, 3, 4]
    drawn = sample(100, 10)
    assert drawn == sorted(drawn) and len(set(drawn)) == 10 and drawn == sample(100, 10)
    assert set(drawn) <= set(sample(100, 40))  # a smaller sample is part of a larger one


def test_sentence_aligned_counts_pieces_on_both_boundaries():
    bounds = {"a": ({0, 10}, {9, 20})}
    assert sentence_aligned([["a", 0, 9], ["a", 10, 20], ["a", 3, 20], ["a", 0, 15]], bounds) == (2, 4)
