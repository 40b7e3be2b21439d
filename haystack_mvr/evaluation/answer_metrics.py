"""
Exact match and token F1 of predicted answers, with the SQuAD / DPR answer normalisation.

``normalize_answer`` is SQuAD v1.1's ``normalize_answer`` (lower-case, drop punctuation, drop the articles
"a", "an", "the", collapse whitespace) after a Unicode NFD normalisation, as DPR's ``_normalize_answer``
(``dpr/data/qa_validation.py``) does. A prediction is scored against every gold answer and the best score is kept.
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "PairedDifference",
    "answer_f1",
    "exact_match",
    "normalize_answer",
    "paired_difference",
    "question_scores",
    "summarize_answers",
]

_ARTICLES = re.compile(r"\b(a|an|the)\b", flags=re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """
    The answer as SQuAD / DPR compare it.

    >>> normalize_answer("The  Denver Broncos!")
    'denver broncos'
    """
    text = unicodedata.normalize("NFD", text).lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _gold(answers: Sequence[str]) -> Sequence[str]:
    if isinstance(answers, str):
        msg = "Pass the gold answers as a list of strings; wrap a single answer as [answer]."
        raise TypeError(msg)
    return answers


def exact_match(prediction: str, answers: Sequence[str]) -> float:
    """``1.0`` if the normalised prediction equals some normalised gold answer, else ``0.0``."""
    predicted = normalize_answer(prediction)
    return float(any(predicted == normalize_answer(a) for a in _gold(answers)))


def _f1(prediction_tokens: list[str], gold_tokens: list[str]) -> float:
    common = Counter(prediction_tokens) & Counter(gold_tokens)
    same = sum(common.values())
    if not prediction_tokens or not gold_tokens:
        return float(prediction_tokens == gold_tokens)
    if same == 0:
        return 0.0
    precision, recall = same / len(prediction_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def answer_f1(prediction: str, answers: Sequence[str]) -> float:
    """The best token F1 (SQuAD's bag-of-tokens overlap) of the prediction against the gold answers."""
    tokens = normalize_answer(prediction).split()
    return max((_f1(tokens, normalize_answer(a).split()) for a in _gold(answers)), default=0.0)


def question_scores(
    predictions: Sequence[str | None], answers: Sequence[Sequence[str]]
) -> tuple[list[float], list[float]]:
    """
    Each question's EM and F1; a missing prediction (``None``) scores 0.

    :returns: ``(em, f1)``, one value per question.
    """
    if len(predictions) != len(answers):
        msg = f"{len(predictions)} predictions for {len(answers)} questions."
        raise ValueError(msg)
    em = [exact_match(p, a) if p is not None else 0.0 for p, a in zip(predictions, answers, strict=True)]
    f1 = [answer_f1(p, a) if p is not None else 0.0 for p, a in zip(predictions, answers, strict=True)]
    return em, f1


def summarize_answers(predictions: Sequence[str | None], answers: Sequence[Sequence[str]]) -> dict[str, float]:
    """
    Mean EM and F1 (fractions) over questions; a missing prediction (``None``) scores 0.

    :returns: ``{"answer_EM": ..., "answer_F1": ...}``.
    """
    em, f1 = question_scores(predictions, answers)
    if not em:
        return {"answer_EM": 0.0, "answer_F1": 0.0}
    return {"answer_EM": sum(em) / len(em), "answer_F1": sum(f1) / len(f1)}


@dataclass(frozen=True)
class PairedDifference:
    """Mean of ``a - b`` over the same questions, its standard error and a two-sided 95% confidence interval."""

    mean: float
    standard_error: float
    low: float
    high: float
    n: int


def paired_difference(a: Sequence[float], b: Sequence[float]) -> PairedDifference:
    """
    The difference of two systems' scores on the same questions (e.g. per-question EM), paired by question.

    Pairing removes what the questions share (an easy question is easy for both), so the interval is narrower
    than the one of two independent means. The interval is the normal one, ``mean +- 1.96 * sd / sqrt(n)`` with
    the sample standard deviation of the differences: the paired t-interval for the large ``n`` of an evaluation
    set (for 0/1 EM this is the Wald interval of McNemar's setting).

    :raises ValueError: when the lengths differ or fewer than two questions are given.
    """
    if len(a) != len(b):
        msg = f"paired scores need the same questions: {len(a)} against {len(b)}."
        raise ValueError(msg)
    n = len(a)
    if n < 2:
        msg = f"a paired difference needs at least two questions, got {n}."
        raise ValueError(msg)
    differences = [x - y for x, y in zip(a, b, strict=True)]
    mean = sum(differences) / n
    variance = sum((d - mean) ** 2 for d in differences) / (n - 1)
    error = math.sqrt(variance / n)
    return PairedDifference(mean, error, mean - 1.96 * error, mean + 1.96 * error, n)
