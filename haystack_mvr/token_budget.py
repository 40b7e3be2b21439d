"""
Token counts and token-boundary cuts: the one implementation behind every budget of tokens in haystack-mvr.

``MultiViewContextBuilder`` fills its ``budget_tokens`` with it, the generative reader cuts its passages to the
prompt's budget with it (``haystack_mvr.readers.generative_model.fit_passages``, in training and answering alike) and
the benchmarks count and cut their contexts with it.

A counter counts many texts at once (``count``), any span of one text from one tokenization (``spans``) and where a
text's first ``limit`` tokens end (``cut``: a character offset at a token boundary, so ``text[:cut]`` is a prefix of
the text). :class:`WordCounter` counts words and punctuation marks; :class:`TokenizerCounter` counts a Hugging Face
tokenizer's tokens without special tokens. :func:`fair_shares` shares a budget out among several texts.

Standard library only (the tokenizer is handed in), so that the builder, the readers and the benchmarks all import
it without a cycle.
"""

from __future__ import annotations

import bisect
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from itertools import islice
from typing import Any, Protocol

__all__ = [
    "WORD_PATTERN",
    "TokenBudgetCounter",
    "TokenizerCounter",
    "WordCounter",
    "cut_text",
    "fair_shares",
    "token_ends_counter",
]

WORD_PATTERN = re.compile(r"\w+|[^\w\s]")
COUNT_BATCH = 1024  # texts per tokenizer call in TokenizerCounter.count


class TokenBudgetCounter(Protocol):
    """Counts tokens: ``count`` for many texts at once, ``spans`` for any span of one text (from one pass over the
    text), ``cut`` for the end of a text's first ``limit`` tokens."""

    def count(self, texts: Sequence[str]) -> list[int]: ...

    def spans(self, text: str) -> Callable[[int, int], int]:
        """A function ``(start, end) -> tokens of text[start:end]``, from one tokenization of ``text``: a token counts
        for the span that holds its last character (a piece's own count can differ slightly, see ``count``)."""
        ...

    def cut(self, text: str, limit: int) -> int:
        """The character offset where ``text``'s first ``limit`` tokens end (a token boundary; ``0`` when ``limit`` is
        not positive)."""
        ...


class WordCounter:
    """Words and punctuation marks (``\\w+|[^\\w\\s]``), each one token."""

    def count(self, texts: Sequence[str]) -> list[int]:
        return [len(WORD_PATTERN.findall(t)) for t in texts]

    def spans(self, text: str) -> Callable[[int, int], int]:
        return lambda start, end: len(WORD_PATTERN.findall(text, start, end))  # only the spans asked for

    def cut(self, text: str, limit: int) -> int:
        ends = [m.end() for m in islice(WORD_PATTERN.finditer(text), max(limit, 0))]
        return ends[-1] if ends else 0


def token_ends_counter(lasts: list[int]) -> Callable[[int, int], int]:
    """``(start, end) -> how many of the sorted token ``lasts`` (each token's last character) lie in [start, end)``."""

    def count(start: int, end: int) -> int:
        return bisect.bisect_left(lasts, end) - bisect.bisect_left(lasts, start)

    return count


class TokenizerCounter:
    """
    A Hugging Face tokenizer's tokens: ``len(tokenizer(text, add_special_tokens=False)["input_ids"])``.

    ``cut`` and ``spans`` read a fast tokenizer's character offsets; with a slow tokenizer (no offsets) ``cut`` is the
    longest prefix ending at a word (:class:`WordCounter`) whose count fits, and ``spans`` counts each span alone. The
    token ends of the last ``cached`` texts ``spans`` read are kept: a context builder sees the same documents query
    after query, and tokenizing a page is most of its cost.
    """

    def __init__(self, tokenizer: Any, cached: int = 256) -> None:
        self.tokenizer = tokenizer
        self.cached = cached
        self._ends: OrderedDict[str, list[int]] = OrderedDict()

    @property
    def has_offsets(self) -> bool:
        """Whether the tokenizer reports character offsets (a fast tokenizer)."""
        return bool(getattr(self.tokenizer, "is_fast", False))

    def count(self, texts: Sequence[str]) -> list[int]:
        out: list[int] = []
        for start in range(0, len(texts), COUNT_BATCH):
            batch = list(texts[start : start + COUNT_BATCH])
            ids = self.tokenizer(batch, add_special_tokens=False, return_attention_mask=False, verbose=False)
            out += [len(x) for x in ids["input_ids"]]
        return out

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Each token's ``(start, end)`` characters in ``text`` (a fast tokenizer only)."""
        encoded = self.tokenizer(
            text, add_special_tokens=False, return_offsets_mapping=True, return_attention_mask=False, verbose=False
        )
        return [(int(start), int(end)) for start, end in encoded["offset_mapping"]]

    def spans(self, text: str) -> Callable[[int, int], int]:
        """Span counts from one encoding of ``text`` (WordPiece: the counts of each span alone; BPE / SentencePiece:
        within a token or so)."""
        if not self.has_offsets:
            return lambda start, end: self.count([text[start:end]])[0]
        ends = self._ends.get(text)
        if ends is None:
            ends = sorted(max(end - 1, start) for start, end in self.offsets(text))
            if self.cached > 0:
                self._ends[text] = ends
                if len(self._ends) > self.cached:
                    self._ends.popitem(last=False)
        else:
            self._ends.move_to_end(text)
        return token_ends_counter(ends)

    def cut(self, text: str, limit: int) -> int:
        if limit <= 0:
            return 0
        if self.has_offsets:
            offsets = self.offsets(text)
            return len(text) if len(offsets) <= limit else offsets[limit - 1][1]
        words = WordCounter()  # a slow tokenizer: the longest prefix ending at a word that fits
        low, high = 0, words.count([text])[0]
        while low < high:
            mid = (low + high + 1) // 2
            if self.count([text[: words.cut(text, mid)]])[0] <= limit:
                low = mid
            else:
                high = mid - 1
        return words.cut(text, low)


def cut_text(counter: TokenBudgetCounter, text: str, limit: int) -> str:
    """``text`` up to where its first ``limit`` tokens end (``counter.cut``): a prefix that ends at a token boundary,
    ``""`` when ``limit`` is not positive."""
    return text[: counter.cut(text, limit)]


def fair_shares(lengths: Sequence[int], budget: int) -> list[int]:
    """How many of its ``lengths[i]`` tokens each text keeps within ``budget``: short ones whole, the others an equal
    share of what is left (a negative budget keeps nothing)."""
    keep = [0] * len(lengths)
    left = max(budget, 0)
    for rank, i in enumerate(sorted(range(len(lengths)), key=lengths.__getitem__)):
        keep[i] = min(lengths[i], left // (len(lengths) - rank))
        left -= keep[i]
    return keep
