"""
A text's sentences as the units snippet mode reads: ``(char_start, char_end, token_start, token_end)``, a sentence
longer than half a window cut into pieces.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence

from haystack_mvr.modeling.sentence_splitting import sentence_spans


def sentence_units(
    text: str, offsets: list[tuple[int, int]], longest: int, piece: int | None = None
) -> list[tuple[int, int, int, int]]:
    """
    ``text``'s sentences as ``(char_start, char_end, token_start, token_end)`` (content tokens, ``offsets`` their
    character spans), a sentence longer than ``longest`` tokens cut into equal pieces of at most ``piece`` tokens
    (default ``longest``).
    """
    return units_of_spans(sentence_spans(text), offsets, longest, piece)


def tokens_with_offsets(tokenizer, texts: list[str]) -> Iterator[tuple[Sequence[int], Sequence[tuple[int, int]]]]:
    """Each text's token ids and character offsets, without special tokens (a fast tokenizer's offsets are read from
    its encodings, not converted to lists)."""
    options = {"add_special_tokens": False, "truncation": False, "verbose": False}
    if getattr(tokenizer, "is_fast", False):
        encoded = tokenizer(texts, return_attention_mask=False, **options)
        return ((e.ids, e.offsets) for e in encoded.encodings)
    encoded = tokenizer(texts, return_offsets_mapping=True, **options)
    return zip(encoded["input_ids"], encoded["offset_mapping"], strict=True)


def units_of_spans(
    spans: Iterable[tuple[int, int]],
    offsets: Sequence[tuple[int, int]],
    longest: int,
    piece: int | None = None,
    first_token: int = 0,
) -> list[tuple[int, int, int, int]]:
    """
    :func:`sentence_units` of the sentences ``spans`` whose tokens are ``offsets`` (all of them: a block of whole
    sentences may be tokenized alone), token positions counted from ``first_token``.
    """
    piece = longest if piece is None else min(piece, longest)
    token_starts = [o[0] for o in offsets]
    units = []
    for s, e in spans:
        lo, hi = bisect_left(token_starts, s), bisect_left(token_starts, e)
        if hi - lo <= longest:
            units.append((s, e, first_token + lo, first_token + hi))
            continue
        parts = -(-(hi - lo) // piece)
        bounds = [lo + (hi - lo) * p // parts for p in range(parts + 1)]
        for p in range(parts):
            a, b = bounds[p], bounds[p + 1]
            char_start = s if p == 0 else offsets[a][0]
            char_end = e if p == parts - 1 else offsets[b][0]
            units.append((char_start, char_end, first_token + a, first_token + b))
    return units
