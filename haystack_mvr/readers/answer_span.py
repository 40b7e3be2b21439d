"""
Grounding a generated answer in the passages it was generated from (standard library only): the answer becomes the
span of one passage that matches it best, so that every answer the generative reader gives is text it read.

:func:`snap_answer` tries, in order, and keeps the first that finds a span:

1. the answer as it is, a whole-word match (not inside a longer word), case-sensitive, then case-insensitive;
2. the contiguous span of words with the best token-level F1 against the answer (SQuAD's normalisation: lowercase,
   punctuation and the articles a / an / the left out), the shorter span on a tie;
3. when no word is shared (a misspelt answer, say), the span of as many words as the answer has whose text is most
   similar to it (``difflib``'s ratio, case-insensitive).

Passages are taken best first: on equal match, the earlier passage and the earlier position win. The span always
starts and ends on a word (punctuation around it is left out, inside it kept), so a step-2 or step-3 span never
carries a stray comma. ``match`` is 1.0 for step 1, the F1 for step 2 and the similarity for step 3.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass

__all__ = ["AnswerSpan", "answer_tokens", "snap_answer"]

_TOKEN = re.compile(r"\w+|[^\w\s]")
_WORD = re.compile(r"\w+")
_ARTICLES = frozenset({"a", "an", "the"})
_LONGEST = 3  # a step-2 span holds at most this many times the answer's words (plus two)


@dataclass(frozen=True)
class AnswerSpan:
    """
    Where an answer was found: ``passages[passage][start:end]`` is its text.

    :param passage: The index of the passage.
    :param start: / :param end: The character span in that passage.
    :param text: ``passages[passage][start:end]``.
    :param match: How well the span matches the answer it was snapped from, in [0, 1] (1.0: the answer itself).
    """

    passage: int
    start: int
    end: int
    text: str
    match: float


def answer_tokens(text: str) -> list[tuple[str, int, int]]:
    """The words of ``text`` that count for SQuAD's F1, normalised, with their character spans: ``(word, start,
    end)``, lowercase, without punctuation marks and articles."""
    out = []
    for m in _TOKEN.finditer(text):
        word = m.group().lower()
        if _WORD.fullmatch(word) and word not in _ARTICLES:
            out.append((word, m.start(), m.end()))
    return out


def snap_answer(answer: str, passages: list[str]) -> AnswerSpan | None:
    """
    The span of ``passages`` that ``answer`` is grounded in (the module's three steps), or ``None`` when the answer
    or every passage has no word (nothing to match).

    ```python
    snap_answer("the vistula", ["Warsaw lies on the Vistula."])
    # AnswerSpan(passage=0, start=15, end=26, text='the Vistula', match=1.0)
    snap_answer("Vistula River", ["Warsaw lies on the Vistula."])
    # AnswerSpan(passage=0, start=19, end=26, text='Vistula', match=0.666...)
    ```
    """
    answer = answer.strip()
    if not answer or not any(_TOKEN.search(p) for p in passages):
        return None
    return _exact(answer, passages) or _best_f1(answer, passages) or _most_similar(answer, passages)


def _exact(answer: str, passages: list[str]) -> AnswerSpan | None:
    before = r"(?<!\w)" if re.match(r"\w", answer) else ""
    after = r"(?!\w)" if re.search(r"\w$", answer) else ""
    pattern = before + re.escape(answer) + after
    for flags in (0, re.IGNORECASE):
        for i, passage in enumerate(passages):
            m = re.search(pattern, passage, flags)
            if m:
                return AnswerSpan(i, m.start(), m.end(), m.group(), 1.0)
    return None


def _best_f1(answer: str, passages: list[str]) -> AnswerSpan | None:
    wanted = Counter(word for word, _, _ in answer_tokens(answer))
    n = sum(wanted.values())
    if not n:
        return None
    longest = _LONGEST * n + 2
    best: tuple[float, int] | None = None
    found = None
    for p, passage in enumerate(passages):
        words = answer_tokens(passage)
        for i, (first, start, _) in enumerate(words):
            if first not in wanted:
                continue
            seen: Counter[str] = Counter()
            common = 0
            for j in range(i, min(len(words), i + longest)):
                word, _, end = words[j]
                seen[word] += 1
                if seen[word] <= wanted[word]:
                    common += 1
                if word not in wanted:
                    continue  # a span that ends on a word the answer lacks is never the best
                length = j - i + 1
                f1 = 2 * common / (length + n)
                key = (f1, -length)
                if best is None or key > best:
                    best, found = key, AnswerSpan(p, start, end, passage[start:end], f1)
    return found


def _most_similar(answer: str, passages: list[str]) -> AnswerSpan | None:
    target = answer.lower()
    size = max(1, len(_TOKEN.findall(answer)))
    best = -1.0
    found = None
    for p, passage in enumerate(passages):
        words = [(m.start(), m.end()) for m in _TOKEN.finditer(passage) if _WORD.fullmatch(m.group())]
        for i in range(len(words)):
            start, end = words[i][0], words[min(len(words), i + size) - 1][1]
            ratio = difflib.SequenceMatcher(None, target, passage[start:end].lower(), autojunk=False).ratio()
            if ratio > best:
                best, found = ratio, AnswerSpan(p, start, end, passage[start:end], ratio)
    return found
