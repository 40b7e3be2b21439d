"""Snippets: consecutive whole sentences merged into views (CAMVR Algorithm 1), sized by count or by tokens."""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

from haystack_mvr.modeling.sentence_splitting import sentence_spans

Span = tuple[int, int]


def merge_groups(spans: Sequence[Span], n: int) -> list[tuple[int, int]]:
    """
    Merge the shortest piece with its shorter neighbour until at most ``n`` remain (Algorithm 1, 5-10).

    A group's length is from its first piece's start to its last piece's end (gaps included). Ties go to the earliest
    piece and, between equally long neighbours, to the left one. O(m log m) for m pieces (a heap of live groups and a
    linked list of neighbours), so documents of thousands of sentences merge at once.

    :param spans: The pieces' ``(start, end)``, in text order (characters or tokens).
    :param n: The most groups to keep (at least 1).
    :returns: ``[(first, last + 1), ...]``: each group's range of piece indices, in order, covering all pieces.
    """
    m = len(spans)
    if m <= n:
        return [(i, i + 1) for i in range(m)]
    size = [e - s for s, e in spans]
    end = list(range(1, m + 1))  # a live group starting at i spans pieces [i, end[i])
    prev = list(range(-1, m - 1))
    nxt = [*range(1, m), -1]
    alive = [True] * m
    heap = [(size[i], i) for i in range(m)]  # (length, start): the earliest among equals pops first
    heapq.heapify(heap)
    groups = m
    while groups > n:
        length, i = heapq.heappop(heap)
        if not alive[i] or length != size[i]:
            continue  # a stale entry: this group was merged since
        left, right = prev[i], nxt[i]
        if left < 0:
            j = right
        elif right < 0:
            j = left
        else:
            j = left if size[left] <= size[right] else right
        lo, hi = min(i, j), max(i, j)
        end[lo] = end[hi]
        size[lo] = spans[end[lo] - 1][1] - spans[lo][0]
        alive[hi] = False
        nxt[lo] = nxt[hi]
        if nxt[hi] >= 0:
            prev[nxt[hi]] = lo
        heapq.heappush(heap, (size[lo], lo))
        groups -= 1
    out, i = [], 0
    while i >= 0 and i < m:
        out.append((i, end[i]))
        i = nxt[i]
    return out


def merge_to_n(spans: Sequence[Span], n: int) -> list[Span]:
    """
    Merge the shortest span with its shorter neighbour until at most ``n`` remain (Algorithm 1, 5-10), by length in
    characters; ties as :func:`merge_groups`.
    """
    return [(spans[a][0], spans[b - 1][1]) for a, b in merge_groups(spans, n)]


def snippet_count(num_tokens: int, num_snippets: int, snippet_tokens: int | None, max_snippets: int | None) -> int:
    """
    How many snippets a document of ``num_tokens`` tokens is cut into.

    ``num_snippets`` at least (paragraph-sized documents keep CAMVR's fixed count), one per ``snippet_tokens`` tokens
    beyond that, so a document's views grow with its length; at most ``max_snippets``, past which neighbouring
    snippets are merged (never dropped). ``snippet_tokens=None``: always ``num_snippets``.
    """
    n = num_snippets
    if snippet_tokens:
        n = max(n, math.ceil(num_tokens / snippet_tokens))
    if max_snippets:
        n = min(n, max_snippets)
    return max(n, 1)


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
