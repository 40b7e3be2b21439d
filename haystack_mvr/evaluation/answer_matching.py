"""DPR's ``has_answer`` (string match type): does a passage contain one of the answers, token for token."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from functools import lru_cache

import regex

# DPR's SimpleTokenizer (dpr/utils/tokenizers.py): runs of letters, digits and combining marks, or one
# character that is neither a separator (\p{Z}) nor a control/format/unassigned code point (\p{C}).
_ALPHA_NUM = r"[\p{L}\p{N}\p{M}]+"
_NON_WS = r"[^\p{Z}\p{C}]"
_TOKEN = regex.compile(f"({_ALPHA_NUM})|({_NON_WS})", flags=regex.IGNORECASE | regex.UNICODE | regex.MULTILINE)


@lru_cache(maxsize=65536)
def normalized_tokens(text: str) -> tuple[str, ...]:
    """
    Tokens of ``text`` as DPR compares them: NFD-normalised, tokenised, each token lower-cased.

    The order (NFD, then tokenise, then ``str.lower`` per token) is DPR's. NFD does *not* strip accents:
    ``"é"`` becomes ``"e"`` + U+0301, and the combining mark (``\\p{M}``) stays inside the token, so
    ``"Beyoncé"`` matches ``"BEYONCÉ"`` (composed or decomposed) but not ``"Beyonce"``.
    Punctuation becomes single-character tokens: ``"U.S."`` is ``("u", ".", "s", ".")``.

    Cached, because evaluation re-tokenises the same corpus passages for many queries.
    """
    return tuple(m.group().lower() for m in _TOKEN.finditer(unicodedata.normalize("NFD", text)))


def _contains(haystack: tuple[str, ...], needle: tuple[str, ...]) -> bool:
    n = len(needle)
    first = needle[0]
    return any(haystack[i] == first and haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


def has_answer(answers: Sequence[str], text: str) -> bool:
    """
    DPR ``has_answer`` with ``match_type="string"``: some answer's token sequence occurs contiguously in ``text``.

    Both sides go through :func:`normalized_tokens` (NFD, DPR SimpleTokenizer regex, lower-case), so the
    match ignores case and whitespace but respects word boundaries (``"Bron"`` is not in ``"Broncos"``)
    and diacritics (``"Beyonce"`` is not in ``"Beyoncé"``, exactly as in DPR).

    One deliberate difference from DPR: an answer with no tokens (``""``, only whitespace) never matches;
    DPR's loop would report it as contained in every passage.

    :param answers: Gold answer strings of one question (a list, not a single string).
    :param text: The passage (or snippet) text.
    :returns: ``True`` if at least one answer is contained.
    :raises TypeError: if ``answers`` is a single string (it would be matched character by character).

    Example:
        >>> has_answer(["Denver Broncos"], "The denver  broncos won Super Bowl 50.")
        True
    """
    if isinstance(answers, str):
        msg = "has_answer expects a list of answer strings; wrap a single answer as [answer]."
        raise TypeError(msg)
    text_tokens = normalized_tokens(text)
    for answer in answers:
        answer_tokens = normalized_tokens(answer)
        if answer_tokens and _contains(text_tokens, answer_tokens):
            return True
    return False
