"""
Exact match and token F1 of predicted answers, with the SQuAD / DPR answer normalisation.

``normalize_answer`` is SQuAD v1.1's ``normalize_answer`` (lower-case, drop punctuation, drop the articles
"a", "an", "the", collapse whitespace) after a Unicode NFD normalisation, as DPR's ``_normalize_answer``
(``dpr/data/qa_validation.py``) does. A prediction is scored against every gold answer and the best score is kept.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Sequence

__all__ = ["answer_f1", "exact_match", "normalize_answer", "summarize_answers"]

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


def summarize_answers(predictions: Sequence[str | None], answers: Sequence[Sequence[str]]) -> dict[str, float]:
    """
    Mean EM and F1 (fractions) over questions; a missing prediction (``None``) scores 0.

    :returns: ``{"answer_EM": ..., "answer_F1": ...}``.
    """
    if len(predictions) != len(answers):
        msg = f"{len(predictions)} predictions for {len(answers)} questions."
        raise ValueError(msg)
    if not answers:
        return {"answer_EM": 0.0, "answer_F1": 0.0}
    em = [exact_match(p, a) if p is not None else 0.0 for p, a in zip(predictions, answers, strict=True)]
    f1 = [answer_f1(p, a) if p is not None else 0.0 for p, a in zip(predictions, answers, strict=True)]
    return {"answer_EM": sum(em) / len(em), "answer_F1": sum(f1) / len(f1)}
