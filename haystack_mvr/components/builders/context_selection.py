"""Pure-Python selection of context pieces within a token budget (the policy of ``MultiViewContextBuilder``).

A candidate is one document: its content, the scores of its views against the query and their character spans.
:func:`select_pieces` returns the pieces to give a reader: runs of whole sentences (exact substrings of the content),
seeded by the best snippet views, grown by neighbouring sentences, never over the budget by the counter's own count.
See ``MultiViewContextBuilder`` for the policy; this module has no Haystack dependency. Tokens are counted and cut by
``haystack_mvr.token_budget`` (the readers' budget uses the same counters).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from haystack_mvr.token_budget import WORD_PATTERN, TokenBudgetCounter, WordCounter

__all__ = ["Candidate", "Piece", "select_pieces"]

Span = tuple[int, int]


@dataclass(frozen=True)
class Candidate:
    """One upstream document: ``content``, and per view its score and its ``[start, end]`` span (or ``None``);
    ``prior`` is added to each of its views' scores to order the seeds (the upstream's opinion of the document).
    ``view_spans`` are the views' own texts where they differ from the spans they seed (a token view seeds its
    sentence): a seed cut to the budget keeps its view's own text."""

    content: str
    scores: Sequence[float]
    spans: Sequence[Span | None]
    prior: float = 0.0
    view_spans: Sequence[Span | None] | None = None


@dataclass(frozen=True)
class Piece:
    """A selected piece: ``content[start:end]`` of candidate ``candidate`` (its index), the best snippet view inside
    it (``view``, its ``score``) and the piece's ``tokens`` counted as a whole."""

    candidate: int
    start: int
    end: int
    view: int
    score: float
    tokens: int


class _Piece:
    """A piece while it is selected: sentences ``a..b`` (inclusive) of ``doc``."""

    __slots__ = ("a", "alive", "b", "doc", "key", "side", "tokens")

    def __init__(self, doc: _Doc, a: int, b: int, tokens: int, key: tuple) -> None:
        self.doc, self.a, self.b, self.tokens, self.key = doc, a, b, tokens, key
        self.side = 1  # the next sentence first, then the one before, alternating
        self.alive = True


class _Doc:
    """A candidate's sentences, their token counts and which piece owns each; split and counted on first use."""

    __slots__ = (
        "_counts",
        "_sentences",
        "_span_count",
        "_split",
        "candidate",
        "counter",
        "npieces",
        "owner",
        "rank",
        "seed_range",
        "seeds",
    )

    def __init__(
        self, rank: int, candidate: Candidate, counter: TokenBudgetCounter, split: Callable[[str], list[Span]]
    ):
        self.rank, self.candidate, self.counter = rank, candidate, counter
        self._sentences: list[Span] | None = None
        self._counts: list[int] | None = None
        self.owner: list[_Piece | None] = []
        self.npieces = 0
        self.seeds: list[tuple[int, int, int]] = []  # (view, first sentence, last sentence)
        self.seed_range: dict[int, tuple[int, int]] = {}
        self._span_count: Callable[[int, int], int] | None = None
        self._split = split

    @property
    def sentences(self) -> list[Span]:
        if self._sentences is None:
            content = self.candidate.content
            raw = self._split(content)
            clauses = whole_clauses(content, raw)
            joined = {p for span in raw for p in span} - {p for span in clauses for p in span}
            self._sentences = _cut_at_views(content, clauses, self.candidate.spans, joined)
            self.owner = [None] * len(self._sentences)
            starts = [s for s, _ in self._sentences]
            ends = [e for _, e in self._sentences]
            for view, span in enumerate(self.candidate.spans):
                if span is None:
                    continue
                a = bisect.bisect_right(ends, span[0])  # the first sentence ending after the span starts
                b = bisect.bisect_left(starts, span[1]) - 1  # the last sentence starting before it ends
                if a <= b:
                    self.seeds.append((view, a, b))
                    self.seed_range[view] = (a, b)
        return self._sentences

    @property
    def counts(self) -> list[int]:
        if self._counts is None:
            self._counts = [self.span_count(s, e) for s, e in self.sentences]
        return self._counts

    def span_count(self, start: int, end: int) -> int:
        """Tokens of ``content[start:end]``, from one tokenization of the content."""
        if self._span_count is None:
            self._span_count = self.counter.spans(self.candidate.content)
        return self._span_count(start, end)

    def span_tokens(self, view: int) -> int:
        """The tokens of a snippet view's own text, without splitting the document: the seed's sentences are that
        text when the spans were cut by the same splitter (else they hold it)."""
        start, end = self.candidate.spans[view]  # type: ignore[misc]
        return self.span_count(start, end)

    def seed_ranges(self) -> dict[int, tuple[int, int]]:
        """The sentences ``(first, last)`` each snippet view covers (splitting the content on first use)."""
        return self.seed_range if self.sentences else {}

    def text(self, a: int, b: int) -> str:
        return self.candidate.content[self.sentences[a][0] : self.sentences[b][1]]


MIN_CLAUSE_WORDS = 3  # a "sentence" of fewer words is a splitter's fragment ("Ward." of "T. J. Ward.")


def whole_clauses(text: str, spans: Sequence[Span]) -> list[Span]:
    """``spans`` (a splitter's sentences of ``text``, in order) with every fragment joined to the sentence before it:
    a span of fewer than ``MIN_CLAUSE_WORDS`` words, or one that starts mid-sentence: punctuation such as ``:``
    first, or, in cased text (some span starts with a capital), a lower-case first letter ("approx. twenty ..."),
    or any span after one that leaves a bracket open ("(i.e." | "Mongolian) and ..."); lower-case text keeps its
    sentences. The first span has no predecessor and is joined to the next one instead."""
    firsts = [text[start:end].lstrip()[:1] for start, end in spans]
    cased = any(first.isupper() for first in firsts)
    out: list[list[int]] = []
    for (start, end), first in zip(spans, firsts, strict=True):
        piece = text[start:end]
        mid_sentence = bool(first) and (first in ",.;:)]}%" or (cased and first.islower()))
        fragment = len(WORD_PATTERN.findall(piece)) < MIN_CLAUSE_WORDS or mid_sentence
        if out and (fragment or out[-1][2] or _open_bracket(text[out[-1][0] : out[-1][1]])):
            out[-1][1] = end
            out[-1][2] = False
        else:
            out.append([start, end, fragment])
    return [(start, end) for start, end, _ in out]


def _open_bracket(text: str) -> bool:
    """Whether ``text`` leaves a round or square bracket open (a sentence does not end inside brackets)."""
    return text.count("(") > text.count(")") or text.count("[") > text.count("]")


def _cut_at_views(
    content: str, sentences: list[Span], views: Sequence[Span | None], joined: set[int] | frozenset[int] = frozenset()
) -> list[Span]:
    """``sentences`` cut where a view's span starts or ends inside one (text without sentence ends, a sentence the
    encoder cut into pieces): each view's text is then whole sentences, so a seed starts where its view does. The
    splitter's boundaries that :func:`whole_clauses` ``joined`` (a fragment's ends) are never cut again: a view that
    is a fragment (the encoder's snippets come from the same splitter) seeds the whole clause that holds it."""
    bounds = sorted({p for span in views if span for p in span} - joined)
    if not bounds:
        return sentences
    out: list[Span] = []
    for start, end in sentences:
        cuts = bounds[bisect.bisect_right(bounds, start) : bisect.bisect_left(bounds, end)]
        for left, right in zip([start, *cuts], [*cuts, end], strict=True):
            while left < right and content[left].isspace():
                left += 1
            while right > left and content[right - 1].isspace():
                right -= 1
            if right > left:
                out.append((left, right))
    return out


class _Selection:
    def __init__(self, docs: list[_Doc], budget: int, piece_tokens: int, max_pieces: int | None, whole: bool):
        self.docs, self.budget, self.piece_tokens, self.max_pieces, self.whole = (
            docs,
            budget,
            piece_tokens,
            max_pieces,
            whole,
        )
        self.used = 0  # tokens taken, by per-sentence counts
        self.reserved = 0  # sum over pieces of max(tokens, piece_tokens)
        self.pieces: list[_Piece] = []
        self.history: list[list[tuple[_Doc, int]]] = []  # sentences added, one list per step, in order
        self.cut: tuple[_Doc, int, int, int, int] | None = None  # (doc, sentence, start, end, view): a cut sentence
        self.seeds: list[tuple[float, int, int, int, _Doc]] | None = None  # (-score - prior, rank, position, view, doc)
        self.pass_start = 0  # ``used`` when the current pass over the seeds began

    # seeds ----------------------------------------------------------------------------------------------------------
    def take_seeds(self) -> None:
        """One pass over the seeds, best first; the first piece a pass takes may pass the reservations."""
        if self.seeds is None:
            self.seeds = []
            for doc in self.docs:
                scores, spans, prior = doc.candidate.scores, doc.candidate.spans, doc.candidate.prior
                self.seeds.extend(
                    (-float(scores[v]) - prior, doc.rank, spans[v][0], v, doc) for v, s in enumerate(spans) if s
                )
            self.seeds.sort(key=lambda s: s[:4])
        self.pass_start = self.used
        for _, _, _, view, doc in self.seeds:
            if self.used >= self.budget:
                return
            if not doc.npieces and self.pieces and not self.may_start(doc, view):
                continue  # decided without splitting the document
            sentence_range = doc.seed_ranges().get(view)
            if sentence_range is None:
                continue  # a span over no sentence (blank text)
            if self.take_seed(doc, view, *sentence_range):
                return  # the best seed alone was cut to the budget: nothing more fits

    def may_start(self, doc: _Doc, view: int) -> bool:
        """Whether a first piece of ``doc`` from ``view`` might fit (the exact check follows on its sentences)."""
        first = self.used == self.pass_start
        if not first and self.budget - self.reserved < self.piece_tokens:
            return False  # a new piece reserves piece_tokens at least
        tokens = doc.span_tokens(view)
        if self.used + tokens > self.budget:
            return False
        return first or self.reserved + max(tokens, self.piece_tokens) <= self.budget

    def take_seed(self, doc: _Doc, view: int, a: int, b: int) -> bool:
        """Take the seed sentences ``a..b`` of ``doc`` if they fit; ``True`` when it was cut at a token boundary."""
        owner, n = doc.owner, len(doc.owner)
        new = [i for i in range(a, b + 1) if owner[i] is None]
        if not new:
            return False
        touching = list({id(p): p for p in (owner[i] for i in range(max(a - 1, 0), min(b + 2, n))) if p}.values())
        if not touching and self.max_pieces is not None and doc.npieces >= self.max_pieces:
            return False
        counts = doc.counts
        new_tokens = sum(counts[i] for i in new)
        merged = sum(p.tokens for p in touching) + new_tokens
        old_reserved = sum(max(p.tokens, self.piece_tokens) for p in touching)
        new_reserved = max(merged, self.piece_tokens)
        if self.whole and not doc.npieces:
            total = sum(counts)  # whole if it fits in the seed's reservation, or in the budget not yet reserved
            unreserved = total <= new_reserved or self.reserved + max(total, self.piece_tokens) <= self.budget
            if unreserved and self.used + total <= self.budget:
                a, b, new, new_tokens, merged = 0, n - 1, list(range(n)), total, total
                new_reserved = max(total, self.piece_tokens)
        reserved = self.reserved - old_reserved + new_reserved
        fits = self.used + new_tokens <= self.budget
        if fits and (reserved <= self.budget or reserved <= self.reserved or self.used == self.pass_start):
            self.add(doc, a, b, new, new_tokens, touching, (-float(doc.candidate.scores[view]), doc.rank, a))
            self.reserved = reserved
            return False
        if self.pieces:
            return False
        # the best seed alone is over the budget: its first sentences that fit, or its first sentence cut
        k, total = 0, 0
        while a + k <= b and total + counts[a + k] <= self.budget:
            total += counts[a + k]
            k += 1
        if k:
            self.add(
                doc, a, a + k - 1, list(range(a, a + k)), total, [], (-float(doc.candidate.scores[view]), doc.rank, a)
            )
            self.reserved = max(total, self.piece_tokens)
            return False
        self.cut_sentence(doc, a, view)
        return True

    def cut_sentence(self, doc: _Doc, i: int, view: int) -> None:
        """Sentence ``i`` cut to the budget at a token boundary: its first tokens, unless ``view``'s text lies inside
        the sentence past them (a token view in text without sentence ends); then the tokens around that text, about
        as many before it as after, so that the piece holds what matched."""
        start, end = doc.sentences[i]
        stop = self.fitting_prefix(doc, start, end)
        own = doc.candidate.view_spans  # token views: their own texts (a snippet view's span is its seed's)
        span = None if own is None else own[view]
        if span is not None and start <= span[0] and span[1] <= end and span[1] > stop:
            lead = self.lead_before(doc, start, span)
            stop = self.fitting_prefix(doc, lead, end)
            if span[1] > stop:  # no word start found before it (text without spaces): the view's text first
                lead, stop = span[0], self.fitting_prefix(doc, span[0], end)
            start = lead
        self.cut = (doc, i, start, stop, view)

    def fitting_prefix(self, doc: _Doc, start: int, end: int) -> int:
        """The end of the longest prefix of ``content[start:end]`` cut at a token boundary within the budget."""
        text = doc.candidate.content[start:end]
        limit, stop = self.budget, 0
        while limit > 0:
            stop = doc.counter.cut(text, limit)
            if doc.counter.count([text[:stop]])[0] <= self.budget:
                break
            limit, stop = limit - 1, 0  # a cut inside a word may count more tokens than the prefix held
        return start + stop

    def lead_before(self, doc: _Doc, start: int, span: Span) -> int:
        """The earliest word start in ``content[start:span[0]]`` leaving about half the budget the view's own text
        does not use before it (``span[0]`` when there is no room)."""
        content = doc.candidate.content
        room = doc.span_count(span[0], span[1]) + (self.budget - doc.span_count(span[0], span[1])) // 2
        lead = span[0]
        for p in range(span[0] - 1, start - 1, -1):
            if (p == start or content[p - 1].isspace()) and not content[p].isspace():
                if doc.span_count(p, span[1]) > room:
                    break
                lead = p
        return lead

    def add(self, doc: _Doc, a: int, b: int, new: list[int], new_tokens: int, touching: list[_Piece], key: tuple):
        if touching:
            piece = min(touching, key=lambda p: p.key)
            for other in touching:
                if other is not piece:
                    self.absorb(piece, other)
            piece.a, piece.b = min(piece.a, a), max(piece.b, b)
            piece.tokens += new_tokens
            piece.key = min(piece.key, key)
        else:
            piece = _Piece(doc, a, b, new_tokens, key)
            self.pieces.append(piece)
            doc.npieces += 1
        for i in new:
            doc.owner[i] = piece
        self.used += new_tokens
        self.history.append([(doc, i) for i in new])

    @staticmethod
    def absorb(piece: _Piece, other: _Piece) -> None:
        for i in range(other.a, other.b + 1):
            other.doc.owner[i] = piece
        piece.a, piece.b = min(piece.a, other.a), max(piece.b, other.b)
        piece.tokens += other.tokens
        piece.key = min(piece.key, other.key)
        other.alive = False
        other.doc.npieces -= 1

    # growth ---------------------------------------------------------------------------------------------------------
    def grow(self, cap: int | None) -> None:
        """Round-robin over pieces in score order, one whole sentence per piece and turn, until none can grow."""
        progressed = True
        while progressed:
            progressed = False
            self.pieces = [p for p in self.pieces if p.alive]
            self.pieces.sort(key=lambda p: p.key)
            for piece in self.pieces:
                if piece.alive and self.grow_one(piece, cap):
                    progressed = True

    def grow_one(self, piece: _Piece, cap: int | None) -> bool:
        doc = piece.doc
        owner, counts = doc.owner, doc.counts
        for side in (piece.side, -piece.side):
            i = piece.b + 1 if side > 0 else piece.a - 1
            if not 0 <= i < len(owner):
                continue
            tokens = counts[i]
            if self.used + tokens > self.budget or (cap is not None and piece.tokens + tokens > cap):
                continue
            owner[i] = piece
            piece.tokens += tokens
            self.used += tokens
            self.history.append([(doc, i)])
            if side > 0:
                piece.b = i
            else:
                piece.a = i
            piece.side = -side
            beyond = i + side
            other = owner[beyond] if 0 <= beyond < len(owner) else None
            if other is not None and other is not piece:  # the pieces touch: one piece
                keep, gone = (piece, other) if piece.key <= other.key else (other, piece)
                self.absorb(keep, gone)
            return True
        return False

    # the result -----------------------------------------------------------------------------------------------------
    def runs(self) -> list[tuple[_Doc, int, int]]:
        """The selected runs of sentences ``(doc, a, b)`` as the history leaves them."""
        selected: dict[int, tuple[_Doc, set[int]]] = {}
        for step in self.history:
            for doc, i in step:
                selected.setdefault(id(doc), (doc, set()))[1].add(i)
        runs = []
        for doc, chosen in selected.values():
            order = sorted(chosen)
            a = prev = order[0]
            for i in order[1:]:
                if i != prev + 1:
                    runs.append((doc, a, prev))
                    a = i
                prev = i
            runs.append((doc, a, prev))
        return runs

    def result(self) -> list[Piece]:
        if self.cut is not None:
            doc, _, start, end, view = self.cut
            if end <= start:
                return []
            tokens = doc.counter.count([doc.candidate.content[start:end]])[0]
            return [Piece(doc.rank, start, end, view, float(doc.candidate.scores[view]), tokens)]
        while True:
            runs = self.runs()
            if not runs:
                return []
            tokens = _count_runs(runs)
            if sum(tokens) <= self.budget:
                break
            if len(self.history) > 1:
                self.history.pop()  # the last-grown sentence (or seed): the counts of whole pieces exceed the sums
                continue
            doc, a, b = runs[0]  # one seed over the budget by the count of its whole text: cut it
            return self.cut_run(doc, a, b)
        return [_piece(doc, a, b, count) for (doc, a, b), count in zip(runs, tokens, strict=True)]

    def cut_run(self, doc: _Doc, a: int, b: int) -> list[Piece]:
        """The only seed left, over the budget by its whole count: its first sentences that fit, or the first cut."""
        for last in range(b, a - 1, -1):
            tokens = doc.counter.count([doc.text(a, last)])[0]
            if tokens <= self.budget:
                return [_piece(doc, a, last, tokens)]
        self.cut_sentence(doc, a, _piece(doc, a, a, 0).view)  # the best view over that sentence
        self.history.clear()
        return self.result()


def _count_runs(runs: list[tuple[_Doc, int, int]]) -> list[int]:
    """The token count of each run's whole text (one counter call)."""
    return runs[0][0].counter.count([doc.text(a, b) for doc, a, b in runs])


def _piece(doc: _Doc, a: int, b: int, tokens: int) -> Piece:
    """The output piece of sentences ``a..b``: scored by the best snippet view whose sentences lie inside it (for a
    seed cut to fit, the best one overlapping it)."""
    scores = doc.candidate.scores
    best = None
    for view, sa, sb in doc.seeds:
        if a <= sa and sb <= b and (best is None or scores[view] > scores[best]):
            best = view
    if best is None:  # a seed cut to its first sentences: the best view overlapping the piece
        for view, sa, sb in doc.seeds:
            if sa <= b and a <= sb and (best is None or scores[view] > scores[best]):
                best = view
    assert best is not None  # every run holds or overlaps the seed it grew from
    start, end = doc.sentences[a][0], doc.sentences[b][1]
    return Piece(doc.rank, start, end, best, float(scores[best]), tokens)


def select_pieces(
    candidates: Sequence[Candidate],
    *,
    budget: int,
    piece_tokens: int,
    split: Callable[[str], list[Span]],
    counter: TokenBudgetCounter | None = None,
    max_pieces_per_document: int | None = None,
    whole_document_if_fits: bool = True,
) -> list[Piece]:
    """
    The pieces of ``candidates`` (in upstream rank order) that fill ``budget`` tokens, in no particular order.

    :param split: Sentence spans of a text (``haystack_mvr.modeling.sentence_splitting.sentence_spans``); a
        splitter's fragments are joined to their neighbours (:func:`whole_clauses`), also where a view starts at one.
    :param counter: The token counter (default :class:`WordCounter`); the pieces' whole-text counts sum to at most
        ``budget`` by it.
    :returns: One :class:`Piece` per run of selected sentences (``candidate`` is the index into ``candidates``).
    """
    counter = counter or WordCounter()
    docs = [_Doc(rank, c, counter, split) for rank, c in enumerate(candidates)]
    selection = _Selection(docs, budget, piece_tokens, max_pieces_per_document, whole_document_if_fits)
    selection.take_seeds()
    while selection.cut is None:
        selection.grow(piece_tokens)
        selection.grow(None)
        if selection.used >= budget:
            break
        # nothing can grow and budget is left: only the tokens used stay reserved, and seeds passed over get
        # another pass (the budget a piece reserved but could not grow into is not wasted)
        used, selection.reserved = selection.used, selection.used
        selection.take_seeds()
        if selection.used == used:
            break
    return selection.result()
