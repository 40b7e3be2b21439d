"""Haystack component that fills a token budget with the best parts of the retrieved documents, for a reader."""

from __future__ import annotations

import bisect
import logging
import math
from typing import Any

import numpy as np
from haystack import Document, component, default_from_dict, default_to_dict
from haystack.core.serialization import import_class_by_name

from haystack_mvr.components.builders.context_selection import Candidate, select_pieces, whole_clauses
from haystack_mvr.components.retrievers.multi_view_retriever import _query_vector
from haystack_mvr.document_stores.types import MultiViewDocumentStore
from haystack_mvr.modeling.sentence_splitting import sentence_spans
from haystack_mvr.token_budget import TokenizerCounter, WordCounter
from haystack_mvr.validation import check_positive_int
from haystack_mvr.views import SPANS_KEY, document_views, piece_document

logger = logging.getLogger(__name__)

__all__ = ["MultiViewContextBuilder"]

ORDERS = ("score", "document")


TOKEN_MATCH_WINDOW = 16  # views (tokens) whose matches add up into one view's score for a multi-vector query


def token_match_scores(views: np.ndarray, query: np.ndarray, window: int = TOKEN_MATCH_WINDOW) -> np.ndarray:
    """
    Each view's score for a multi-vector query ``(m, d)`` (a ColBERT's, over token views in document order): what
    the query's vectors add to MaxSim through the views they match best, each weighed down linearly with its distance
    (in views) and not counted past ``window // 2``, divided by ``m``. So pieces are seeded where the query's tokens
    matched, most where many matched close together; a view no query vector matched near scores 0.

    Dividing by ``m`` puts the scores on a one-vector query's scale (MaxSim / m is a mean similarity, as a snippet
    view's score is), the scale ``upstream_weight`` is weighed against: undivided, a ColBERT's peaks are many times
    the upstream's ranking (0-1), which then hardly orders the seeds (measured in
    ``benchmarks/results/late_interaction_context.pages.md``).
    """
    similarities = views @ query.T
    best = similarities.argmax(axis=0)
    contribution = np.bincount(best, weights=similarities.max(axis=0), minlength=len(views))
    half = window // 2
    kernel = 1.0 - np.abs(np.arange(-half, half + 1)) / (half + 1)
    return np.convolve(contribution, kernel)[half : half + len(views)] / len(query)


# A "sentence" holding more token views than this is no sentence (a transcript, scraped text, a list without sentence
# ends: the splitter gives the whole page): its token views seed runs of about TOKEN_RUN_VIEWS views instead.
LONG_SENTENCE_VIEWS = 128
TOKEN_RUN_VIEWS = 16


def token_seed_spans(
    sentences: list[tuple[int, int]], spans: list[tuple[int, int] | None], scores: list[float]
) -> list[Any]:
    """
    Token views as seeds of whole sentences: each sentence's best-scoring token view gets that sentence's span
    (one of ``sentences``, the document's ``sentence_spans``), every other view ``None`` (scored, seeding nothing).
    Without this, every token's span would cut the sentences at each token and pieces would be runs of words; with
    it, one seed a sentence, ordered by ``token_match_scores``, and the piece's matched view is the token that
    scored best in it.

    A sentence that holds more than ``LONG_SENTENCE_VIEWS`` token views (text without sentence ends, where the
    splitter's one "sentence" is the whole page) is cut into runs of ``TOKEN_RUN_VIEWS`` views, each ending between
    two words (never between two pieces of one word), the last run joined to the one before when it is shorter
    than half a run: each run's best token seeds that run, so the page gives one seed per run, and a piece holds
    the tokens the query matched rather than the page's first words.
    """
    ends = [end for _, end in sentences]
    in_sentence: dict[int, list[int]] = {}
    for view, span in enumerate(spans):
        if span is None:
            continue
        k = bisect.bisect_right(ends, span[0])  # the first sentence ending after the token starts
        if k < len(sentences):
            in_sentence.setdefault(k, []).append(view)
    out: list[Any] = [None] * len(spans)
    for k, views in in_sentence.items():
        if len(views) <= LONG_SENTENCE_VIEWS:
            out[_best(views, scores)] = sentences[k]
            continue
        for run in _word_runs(views, spans):
            out[_best(run, scores)] = (min(spans[v][0] for v in run), max(spans[v][1] for v in run))  # type: ignore[index]
    return out


def _best(views: list[int], scores: list[float]) -> int:
    """The best-scoring of ``views`` (the first of equals)."""
    best = views[0]
    for view in views[1:]:
        if scores[view] > scores[best]:
            best = view
    return best


def _word_runs(views: list[int], spans: list[Any]) -> list[list[int]]:
    """``views`` (token views of one long sentence) in text order, cut into runs of ``TOKEN_RUN_VIEWS`` views where
    a gap separates two views' spans (between words); a last run under half a run joins the one before."""
    ordered = sorted(views, key=lambda v: spans[v])
    runs: list[list[int]] = [[ordered[0]]]
    for view in ordered[1:]:
        run = runs[-1]
        if len(run) >= TOKEN_RUN_VIEWS and spans[view][0] > max(spans[v][1] for v in run):
            runs.append([view])
        else:
            run.append(view)
    if len(runs) > 1 and len(runs[-1]) < TOKEN_RUN_VIEWS // 2:
        runs[-2].extend(runs.pop())
    return runs


@component
class MultiViewContextBuilder:
    """
    Fills a budget of tokens with the best parts of the documents an upstream retriever or joiner returned.

    The upstream documents (``MultiViewRetriever``, BM25, a hybrid joiner; deduplicated by id, upstream order =
    rank) are the candidates. Their views and spans come from ``document_store`` (one ``search`` restricted to
    their ids, ``return_embedding=True``) and every view is scored against the query; content and ``meta`` are the
    store's copy. Candidates the store does not hold, or holds without snippet spans, are skipped (logged).

    Policy:

    1. A piece is a run of whole sentences of one document (split as the snippets were, by
       ``haystack_mvr.modeling.sentence_splitting``), an exact substring of its content. A splitter's fragment (a
       "sentence" shorter than a clause, or one that starts mid-sentence) is joined to its neighbour
       (``context_selection.whole_clauses``), also where a snippet view is that fragment: it seeds the whole clause. A
       snippet view's span covers a run of sentences; non-snippet views (span ``None``) only rank documents upstream.
       Token views (a late-interaction query, ``packed_query_embedding`` of several vectors) seed the sentence they fall
       in, each sentence by its best token's ``token_match_scores``; a "sentence" of more than ``LONG_SENTENCE_VIEWS``
       token views (text without sentence ends) is seeded as runs of ``TOKEN_RUN_VIEWS`` tokens (``token_seed_spans``).
    2. Seeds: every candidate's snippet views, best first by their score plus ``upstream_weight`` times their
       document's upstream score, min-max normalised over the candidates (by rank when upstream gave no scores;
       ties: upstream rank, then position): the upstream ranking (a hybrid's BM25 half) orders the documents, the
       views their parts. The default 1.0 was chosen on training questions of squad-mv and pages
       (``benchmarks/results/rag_context.*.tune.md``). A new piece
       reserves ``max(its tokens, piece_tokens)``, so that it can grow; a seed is taken when its new tokens fit the
       budget and the reservations still do (else it is passed over: a later, shorter one may fit) and, for a new
       piece, ``max_pieces_per_document`` allows it. A seed overlapping or touching a piece of its document extends
       it (only its new text counts). The best seed is always taken: when even it is over the budget, its first
       sentences that fit, or its first sentence cut at token boundaries (the only piece that is not whole
       sentences; nothing else is then taken): its first tokens, or, for a token view whose own text lies past
       them, the tokens around that text.
    3. With ``whole_document_if_fits``, a document's first piece is the whole document when that fits in what the
       seed's piece reserves or in the budget not yet reserved: short documents go in whole while the budget allows.
    4. Growth: pieces grow by whole neighbouring sentences, round-robin over pieces in score order, one sentence a
       turn, the next sentence first and then alternating before / after: first each up to ``piece_tokens``, then
       the leftover budget is shared the same way. Pieces that touch merge; no text is repeated. When nothing can
       grow (documents taken whole, say) and budget is left, the reservations shrink to the tokens taken, the seeds
       passed over get another pass (its first new piece may use all that is left), and growth resumes.
    5. Tokens: with ``tokenizer``, ``len(tokenizer(text, add_special_tokens=False)["input_ids"])``; else words and
       punctuation marks (``\\w+|[^\\w\\s]``): a WordPiece tokenizer counts somewhat more (``docs/rag.md``), so
       name the reader's tokenizer for exact budgets. Bookkeeping sums
       per-sentence counts (one tokenization of each document); each piece's count as a whole, which can differ
       slightly, is checked at the end, and the last-grown sentences are given back until the pieces fit.

    Output: one ``Document`` per piece, best first (``order="score"``) or grouped by source document in upstream
    order, pieces in text order (``"document"``). ``id`` is ``"{source id}#{start}-{end}"``, ``score`` the best
    snippet view inside the piece, ``meta`` the source's (without views, spans and upstream ``mvr_matched_*`` keys)
    plus ``mvr_source_id``, ``mvr_source_span`` (``[start, end]`` in the source content), ``mvr_matched_view``,
    ``mvr_matched_scope`` (``"snippet"``), ``mvr_matched_span`` and ``mvr_matched_text`` (that best view) and
    ``mvr_piece_tokens`` (the piece's count as a whole): ``haystack_mvr.views.piece_document``.
    """

    def __init__(
        self,
        document_store: MultiViewDocumentStore,
        budget_tokens: int = 512,
        tokenizer: str | None = None,
        tokenizer_kwargs: dict[str, Any] | None = None,
        piece_tokens: int = 64,
        max_pieces_per_document: int | None = None,
        order: str = "score",
        whole_document_if_fits: bool = True,
        upstream_weight: float = 1.0,
    ) -> None:
        """
        Create a MultiViewContextBuilder.

        :param document_store: The multi-view store (FAISS, Qdrant, ...) that holds the candidates' views.
        :param budget_tokens: The context's size in tokens, a positive integer (``run`` can override it).
        :param tokenizer: A Hugging Face tokenizer folder or hub id (loaded by ``AutoTokenizer`` in ``warm_up``), or
            ``None`` to count words and punctuation marks.
        :param tokenizer_kwargs: Extra arguments for ``AutoTokenizer.from_pretrained``.
        :param piece_tokens: The size a piece reserves and grows to before the leftover budget is shared out (64: a
            snippet view and room to grow, so that several seeds enter a small budget; chosen on training questions
            of pages and squad-mv, ``benchmarks/results/rag_context.*.tune.pieces.md``).
        :param max_pieces_per_document: At most this many pieces per document (``None``: no limit).
        :param order: ``"score"`` (best piece first) or ``"document"`` (by source document, pieces in text order).
        :param whole_document_if_fits: Take a document whole when it fits in what its first piece reserves.
        :param upstream_weight: How much the upstream's ranking orders the seeds beside the views' own scores: a
            seed's priority is its score + ``upstream_weight`` x its document's upstream score, min-max normalised
            over the candidates (0: the views' scores alone).
        :raises ValueError: for a store that is not a multi-view store, a non-positive count or an unknown order.
        """
        if not isinstance(document_store, MultiViewDocumentStore):
            msg = (
                "document_store must be a multi-view document store (FaissMultiViewDocumentStore, "
                f"QdrantMultiViewDocumentStore, ...), got {type(document_store).__name__}."
            )
            raise ValueError(msg)
        if order not in ORDERS:
            msg = f"order must be one of {list(ORDERS)}, got {order!r}."
            raise ValueError(msg)
        if max_pieces_per_document is not None:
            max_pieces_per_document = check_positive_int("max_pieces_per_document", max_pieces_per_document)
        if not isinstance(whole_document_if_fits, bool):
            msg = f"whole_document_if_fits must be a bool, got {whole_document_if_fits!r}."
            raise ValueError(msg)
        if tokenizer_kwargs is not None and not isinstance(tokenizer_kwargs, dict):
            msg = f"tokenizer_kwargs must be a dict or None, got {type(tokenizer_kwargs).__name__}."
            raise ValueError(msg)
        self.document_store = document_store
        self.budget_tokens = check_positive_int("budget_tokens", budget_tokens)
        self.tokenizer = tokenizer
        self.tokenizer_kwargs = tokenizer_kwargs
        self.piece_tokens = check_positive_int("piece_tokens", piece_tokens)
        self.max_pieces_per_document = max_pieces_per_document
        self.order = order
        self.whole_document_if_fits = whole_document_if_fits
        if (
            isinstance(upstream_weight, bool)
            or not isinstance(upstream_weight, (int, float))
            or not math.isfinite(upstream_weight)
            or upstream_weight < 0
        ):
            msg = f"upstream_weight must be a finite number >= 0, got {upstream_weight!r}."
            raise ValueError(msg)
        self.upstream_weight = float(upstream_weight)
        self._counter: WordCounter | TokenizerCounter | None = None if tokenizer else WordCounter()

    def warm_up(self) -> None:
        """Open the store (a FAISS ``index_path``, a Qdrant folder or server) and load the tokenizer, if one is named
        (idempotent): a warmed-up pipeline answers its first query as fast as the next."""
        store_warm_up = getattr(self.document_store, "warm_up", None)
        if store_warm_up is not None:
            store_warm_up()
        if self._counter is None:
            from transformers import AutoTokenizer

            from haystack_mvr.modeling.loading import resolve_model

            hint = (
                "MultiViewContextBuilder(tokenizer=...) names a tokenizer folder or a hub id cached on this machine "
                "(the embedders' model folder fits), or None to count words."
            )
            name, options = resolve_model(self.tokenizer, hint=hint)  # at once, naming it, before any download
            kwargs = dict(self.tokenizer_kwargs or {})
            if options.local_files_only:
                kwargs.setdefault("local_files_only", True)
            try:
                tokenizer = AutoTokenizer.from_pretrained(name, **kwargs)
            except OSError as error:  # a folder or cache entry without a tokenizer in it
                msg = f"MultiViewContextBuilder could not load the tokenizer {self.tokenizer!r}: {error}"
                raise OSError(msg) from error
            self._counter = TokenizerCounter(tokenizer)

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self,
            document_store=self.document_store.to_dict(),
            budget_tokens=self.budget_tokens,
            tokenizer=self.tokenizer,
            tokenizer_kwargs=self.tokenizer_kwargs,
            piece_tokens=self.piece_tokens,
            max_pieces_per_document=self.max_pieces_per_document,
            order=self.order,
            whole_document_if_fits=self.whole_document_if_fits,
            upstream_weight=self.upstream_weight,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MultiViewContextBuilder:
        params = dict(data["init_parameters"])  # the caller's dict is left as it is
        data = {**data, "init_parameters": params}
        store = params["document_store"]
        params["document_store"] = import_class_by_name(store["type"]).from_dict(store)  # type: ignore[attr-defined]
        return default_from_dict(cls, data)

    def _prepare(
        self,
        documents: list[Document],
        query_embedding: list[float] | None,
        packed_query_embedding: str | None,
        budget_tokens: int | None,
        encoder: dict[str, Any] | None,
    ) -> tuple[list[Document], Any, int]:
        """Check the inputs, the query ``encoder`` once by the store (as for the retriever): ``(unique candidates,
        query, budget)``."""
        if (query_embedding is None) == (packed_query_embedding is None):
            given = "both" if query_embedding is not None else "neither"
            msg = (
                "MultiViewContextBuilder needs exactly one of query_embedding (a list[float]) and "
                f"packed_query_embedding (MultiViewTextEmbedder's packed_embedding), got {given}."
            )
            raise ValueError(msg)
        query = _query_vector(query_embedding, packed_query_embedding)
        budget = self.budget_tokens if budget_tokens is None else check_positive_int("budget_tokens", budget_tokens)
        if encoder:
            self.document_store.check_query_encoder(encoder)
        seen: set[str] = set()
        unique = [d for d in documents if not (d.id in seen or seen.add(d.id))]  # each id's first occurrence
        self.warm_up()
        return unique, query, budget

    def _priors(self, unique: list[Document]) -> list[float]:
        """``upstream_weight`` x each upstream document's score, min-max normalised over the candidates (1 for the
        best, 0 for the worst; by rank when upstream gave no scores): what the upstream (BM25's half of a hybrid)
        knows about a document that its views' scores do not."""
        if not self.upstream_weight or len(unique) < 2:
            return [0.0] * len(unique)
        scores = [d.score for d in unique]
        if any(s is None for s in scores):
            scores = [float(len(unique) - i) for i in range(len(unique))]
        low, high = min(scores), max(scores)
        if high == low:
            return [0.0] * len(unique)
        return [self.upstream_weight * (s - low) / (high - low) for s in scores]

    def _search_args(self, unique: list[Document], query: Any) -> dict[str, Any]:
        ids = [d.id for d in unique]
        return {
            "query_embedding": query,
            "top_k": len(ids),
            "filters": {"field": "id", "operator": "in", "value": ids},
            "return_embedding": True,
        }

    def _finish(
        self, unique: list[Document], found: list[Document], query: Any, budget: int
    ) -> dict[str, list[Document]]:
        by_id = {d.id: d for d in found}
        q = np.asarray(query, dtype=np.float32)
        sources: list[Document] = []
        candidates: list[Candidate] = []
        missing: list[str] = []
        unusable: list[str] = []
        priors = self._priors(unique)
        split_texts: dict[str, list[tuple[int, int]]] = {}
        clause_texts: dict[str, list[tuple[int, int]]] = {}

        def split(text: str) -> list[tuple[int, int]]:  # each text split once (token seeds, then the pieces)
            if text not in split_texts:
                split_texts[text] = sentence_spans(text)
            return split_texts[text]

        def clauses(text: str) -> list[tuple[int, int]]:  # the sentences the pieces are made of (select_pieces')
            if text not in clause_texts:
                clause_texts[text] = whole_clauses(text, split(text))
            return clause_texts[text]

        for upstream, prior in zip(unique, priors, strict=True):
            doc = by_id.get(upstream.id)
            if doc is None:
                missing.append(upstream.id)
                continue
            views = document_views(doc)
            spans = doc.meta.get(SPANS_KEY)
            if views is None or not doc.content or not spans or all(s is None for s in spans):
                unusable.append(doc.id)
                continue
            if len(spans) != views.shape[0]:
                unusable.append(doc.id)
                continue
            scores = (views @ q if q.ndim == 1 else token_match_scores(views, q)).tolist()
            sources.append(doc)
            spans = [None if s is None else (s[0], s[1]) for s in spans]
            if q.ndim == 2:  # token views (a late-interaction query): seeds are the sentences they fall in
                seeds = token_seed_spans(clauses(doc.content), spans, scores)
                candidates.append(Candidate(doc.content, scores, seeds, prior, view_spans=spans))
            else:
                candidates.append(Candidate(doc.content, scores, spans, prior))
        if missing:
            logger.warning(
                "MultiViewContextBuilder skipped %d of %d candidates the document store does not hold (with vectors): "
                "%s",
                len(missing),
                len(unique),
                missing[:5],
            )
        if unusable:
            logger.warning(
                "MultiViewContextBuilder skipped %d of %d candidates stored without snippet spans: %s",
                len(unusable),
                len(unique),
                unusable[:5],
            )
        if not candidates:
            return {"documents": []}
        pieces = select_pieces(
            candidates,
            budget=budget,
            piece_tokens=self.piece_tokens,
            split=split,
            counter=self._counter,
            max_pieces_per_document=self.max_pieces_per_document,
            whole_document_if_fits=self.whole_document_if_fits,
        )
        if self.order == "score":
            pieces.sort(key=lambda p: (-p.score, p.candidate, p.start))
        else:
            pieces.sort(key=lambda p: (p.candidate, p.start))
        return {
            "documents": [
                piece_document(sources[p.candidate], p.start, p.end, p.view, p.score, p.tokens) for p in pieces
            ]
        }

    @component.output_types(documents=list[Document])
    def run(
        self,
        documents: list[Document],
        query_embedding: list[float] | None = None,
        packed_query_embedding: str | None = None,
        budget_tokens: int | None = None,
        encoder: dict[str, Any] | None = None,
    ) -> dict[str, list[Document]]:
        """
        Select the pieces of ``documents`` that fill the budget.

        :param documents: The candidates, best first (a retriever's or joiner's ``documents``).
        :param query_embedding: The query vector (any embedder's ``embedding``).
        :param packed_query_embedding: The query as ``MultiViewTextEmbedder``'s ``packed_embedding``; give exactly
            one of the two.
        :param budget_tokens: This run's budget, a positive integer (``None``: the init one).
        :param encoder: The query encoder's identity (``MultiViewTextEmbedder``'s ``encoder``), checked against the
            store's ``encoder_config`` as ``MultiViewRetriever`` checks it.
        :returns: ``{"documents": [...]}``: one ``Document`` per piece, as the class docstring describes.
        :raises ValueError: for a budget that is not a positive integer, not exactly one query, or another encoder.
        """
        unique, query, budget = self._prepare(
            documents, query_embedding, packed_query_embedding, budget_tokens, encoder
        )
        if not unique:
            return {"documents": []}
        found = self.document_store.search(**self._search_args(unique, query))
        return self._finish(unique, found, query, budget)

    @component.output_types(documents=list[Document])
    async def run_async(
        self,
        documents: list[Document],
        query_embedding: list[float] | None = None,
        packed_query_embedding: str | None = None,
        budget_tokens: int | None = None,
        encoder: dict[str, Any] | None = None,
    ) -> dict[str, list[Document]]:
        """Asynchronous :meth:`run` (the store's ``search_async``)."""
        unique, query, budget = self._prepare(
            documents, query_embedding, packed_query_embedding, budget_tokens, encoder
        )
        if not unique:
            return {"documents": []}
        found = await self.document_store.search_async(**self._search_args(unique, query))
        return self._finish(unique, found, query, budget)
