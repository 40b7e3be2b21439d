"""
What haystack-mvr's sentence-transformers modules share: the names of the features they pass one another, snippet
mode's defaults, and the feature tensors (spans, sentence rows) they build and read.
"""

from __future__ import annotations

import torch
from torch import Tensor

from haystack_mvr.modeling.config import MultiViewConfig
from haystack_mvr.modeling.snippets import Span

SENTENCES = "mvr_sentences"
WINDOWS = "mvr_windows"
SPANS = "mvr_spans"
POOLING = "mvr_pooling"
VIEW_MASK = "mvr_view_mask"
# the features the modules add beside the backbone's inputs (never passed to the backbone)
EXTRA_FEATURES = (SENTENCES, WINDOWS, SPANS, POOLING, VIEW_MASK)
# Snippet mode's defaults are MultiViewConfig's (not yet tuned on a dev split: see the README's Long documents).
DEFAULT_SNIPPET_TOKENS = MultiViewConfig.snippet_tokens
DEFAULT_WINDOW_OVERLAP = MultiViewConfig.window_overlap
DEFAULT_MAX_VIEWS = MultiViewConfig.max_views
DEFAULT_NUM_SNIPPETS = 8


def spans_tensor(spans: list[list[Span | None]], num_views: int) -> Tensor:
    """``(B, V, 2)`` long: each view's character span, ``-1`` for a view that is no snippet."""
    out = torch.full((len(spans), num_views, 2), -1, dtype=torch.long)
    for b, row in enumerate(spans):
        for v, span in enumerate(row[:num_views]):
            if span is not None:
                out[b, v, 0], out[b, v, 1] = span
    return out


def sentences_tensor(sentences: list[list[tuple[int, int, int, int]]]) -> Tensor:
    """``(B, S, 4)`` long: each row's sentence rows, zero rows after its last (a sentence is never empty)."""
    out = torch.zeros((len(sentences), max(map(len, sentences), default=0), 4), dtype=torch.long)
    for b, rows in enumerate(sentences):
        if rows:
            out[b, : len(rows)] = torch.tensor(rows, dtype=torch.long)
    return out


def sentence_rows(sentences: Tensor | list) -> list[list[tuple[int, int, int, int]]]:
    """The sentence rows of :func:`sentences_tensor` (or such lists, returned as they are), padding left out."""
    if not isinstance(sentences, Tensor):
        return [[tuple(row) for row in rows] for rows in sentences]
    return [[tuple(row) for row in rows if row[1] > row[0]] for rows in sentences.tolist()]
