"""CAMVR Algorithm 1: split a document into exactly ``n`` snippets of whole sentences."""

from __future__ import annotations

from collections.abc import Sequence

from haystack_mvr.modeling.sentence_splitting import sentence_spans

Span = tuple[int, int]


def merge_to_n(spans: Sequence[Span], n: int) -> list[Span]:
    """
    Merge the shortest sentence with its shorter neighbour until at most ``n`` spans remain (Algorithm 1, 5-10).

    Ties go to the earliest sentence and, between equally long neighbours, to the left one.
    """
    merged = list(spans)
    while len(merged) > n:
        lengths = [e - s for s, e in merged]
        i = lengths.index(min(lengths))
        if i == 0:
            j = 1
        elif i == len(merged) - 1:
            j = i - 1
        else:
            j = i - 1 if lengths[i - 1] <= lengths[i + 1] else i + 1
        lo, hi = min(i, j), max(i, j)
        merged[lo : hi + 1] = [(merged[lo][0], merged[hi][1])]
    return merged


def split_into_snippets(text: str, n: int, *, pad: bool = True) -> list[Span | None]:
    """
    Split ``text`` into ``n`` snippets of whole sentences, as character spans.

    :param text: The document text.
    :param n: The number of snippets (views).
    :param pad: Pad with ``None`` (an empty snippet) up to ``n`` when the text has fewer sentences
        (Algorithm 1, step 3); with ``pad=False`` the list can be shorter than ``n``.
    :returns: ``n`` spans (or fewer without padding); ``None`` marks an empty snippet.
    """
    if n < 1:
        msg = f"n must be at least 1, got {n}."
        raise ValueError(msg)
    snippets: list[Span | None] = list(merge_to_n(sentence_spans(text), n))
    if pad:
        snippets += [None] * (n - len(snippets))
    return snippets


def view_for_offset(spans: Sequence[Span | None], offset: int) -> int | None:
    """The index of the span that holds character ``offset`` (e.g. an answer start), or ``None``."""
    for i, span in enumerate(spans):
        if span is not None and span[0] <= offset < span[1]:
            return i
    # An offset on whitespace between sentences belongs to the snippet that follows it.
    following = [i for i, span in enumerate(spans) if span is not None and span[0] > offset]
    return following[0] if following else None
