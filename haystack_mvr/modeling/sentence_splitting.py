"""Sentence boundaries as character spans: NLTK Punkt when its data is installed, untrained Punkt otherwise."""

from __future__ import annotations

import logging
from functools import lru_cache

logger = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def _punkt():
    # nltk.data.find only looks at local folders: it never downloads, so it cannot hang.
    from nltk.tokenize.punkt import PunktSentenceTokenizer, PunktTokenizer

    try:
        return PunktTokenizer("english")
    except LookupError:
        logger.warning(
            "NLTK Punkt data is not installed; splitting sentences with untrained Punkt "
            "(install it with: python -m nltk.downloader punkt_tab)."
        )
        return PunktSentenceTokenizer()


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """
    Character spans ``(start, end)`` of the sentences of ``text``, in order, without surrounding whitespace.

    :param text: Any string; an empty or blank string has no sentences.
    """
    if not text or not text.strip():
        return []
    return [(int(s), int(e)) for s, e in _punkt().span_tokenize(text)]
