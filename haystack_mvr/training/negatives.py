"""Hard negatives: BM25 (DPR's recipe) and dense negatives mined with a trained checkpoint (coCondenser round two).

A negative of a query is never one of its known positives and never a passage that contains one of its answers
(DPR's ``has_answer``: NFD-normalised, lower-cased, regex-tokenised token sequences), checked on the text the
encoder sees. Mined negatives travel as JSONL, one query per line::

    {"query_id": "56be4db0acb8001400a502ec", "negatives": [{"id": "...", "title": "...", "text": "..."}, ...]}
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from haystack_mvr.datasets.jsonl import read_jsonl
from haystack_mvr.datasets.squad_mv import Passage
from haystack_mvr.evaluation.answer_matching import has_answer
from haystack_mvr.modeling.scoring import max_over_views, view_scores
from haystack_mvr.training.data import TrainingExample

logger = logging.getLogger(__name__)

__all__ = ["bm25_negatives", "is_valid_negative", "mine_negatives", "read_negatives", "write_negatives"]


def _plain_text(passage: Passage) -> str:
    return passage.text


def is_valid_negative(
    example: TrainingExample, passage: Passage, text_of: Callable[[Passage], str] = _plain_text
) -> bool:
    """``True`` unless ``passage`` is a known positive of the example or its encoded text holds an answer."""
    if passage.id in example.positive_ids:
        return False
    return not (example.answers and has_answer(list(example.answers), text_of(passage)))


def _unique_queries(examples: Sequence[TrainingExample]) -> dict[str, TrainingExample]:
    """One example per query id; positives of all examples of a query are merged."""
    merged: dict[str, TrainingExample] = {}
    for e in examples:
        if e.query_id in merged:
            first = merged[e.query_id]
            merged[e.query_id] = TrainingExample(
                first.query_id,
                first.query,
                first.positive,
                tuple(dict.fromkeys(first.answers + e.answers)),
                first.answer_start,
                first.positive_ids | e.positive_ids,
            )
        else:
            merged[e.query_id] = e
    return merged


def _select(
    example: TrainingExample,
    ranked: Sequence[int],
    corpus: Sequence[Passage],
    num_negatives: int,
    text_of: Callable[[Passage], str],
) -> list[Passage]:
    chosen = []
    for i in ranked:
        if is_valid_negative(example, corpus[i], text_of):
            chosen.append(corpus[i])
            if len(chosen) == num_negatives:
                break
    return chosen


def bm25_negatives(
    examples: Sequence[TrainingExample],
    corpus: Sequence[Passage],
    *,
    num_negatives: int = 30,
    depth: int = 100,
    text_of: Callable[[Passage], str] = _plain_text,
    show_progress: bool = False,
) -> dict[str, list[Passage]]:
    """
    DPR's BM25 hard negatives: the best-ranked passages that are neither a positive nor hold an answer.

    BM25 (``bm25s``, English stopwords) indexes ``title + " " + text``; passages with a zero score are skipped.

    :param examples: Training examples (their query, answers and positives).
    :param corpus: The passages to search.
    :param num_negatives: Negatives kept per query (fewer when the ranking runs out).
    :param depth: How many BM25 results per query to look through.
    :param text_of: The text the encoder sees for a passage; the answer check runs on it.
    :returns: ``{query_id: [Passage, ...]}``, best-ranked first.
    """
    try:
        import bm25s
    except ImportError as e:
        msg = 'BM25 negatives need bm25s: pip install "haystack-mvr[train]" (or set num_bm25_negatives to 0).'
        raise ImportError(msg) from e
    if not corpus:
        return {}
    queries = _unique_queries(examples)
    index_texts = [f"{p.title} {p.text}".strip() for p in corpus]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(index_texts, stopwords="en", show_progress=False), show_progress=False)
    query_tokens = bm25s.tokenize(
        [e.query for e in queries.values()], stopwords="en", return_ids=False, show_progress=False
    )
    k = min(len(corpus), depth + max(len(e.positive_ids) for e in queries.values()))
    ranked, scores = retriever.retrieve(query_tokens, k=k, show_progress=show_progress)
    result = {}
    for (qid, example), ids, row_scores in zip(queries.items(), ranked, scores, strict=True):
        candidates = [int(i) for i, s in zip(ids, row_scores, strict=True) if s > 0]
        result[qid] = _select(example, candidates, corpus, num_negatives, text_of)
    return result


def padded_rows(matrices: Sequence[np.ndarray], dim: int) -> tuple[np.ndarray, np.ndarray]:
    """``(n, r_max, d)`` float32 rows padded with zeros and the ``(n, r_max)`` mask of the real ones."""
    rows = max((m.shape[0] for m in matrices), default=0)
    padded = np.zeros((len(matrices), max(rows, 1), dim), dtype=np.float32)
    mask = np.zeros((len(matrices), max(rows, 1)), dtype=bool)
    for i, m in enumerate(matrices):
        padded[i, : m.shape[0]] = m
        mask[i, : m.shape[0]] = True
    return padded, mask


def maxsim_scores(
    queries: torch.Tensor, query_mask: torch.Tensor, views: torch.Tensor, view_mask: torch.Tensor
) -> torch.Tensor:
    """
    ``(B, N)`` MaxSim: for each real query vector its best real view of a document, summed over the query's vectors.
    A one-vector query (``m = 1``) gets ``max_i f_i(q, d)`` (MVR Eq. 4) exactly.

    :param queries: ``(B, m, d)``; ``query_mask``: ``(B, m)``, ``True`` for real vectors.
    :param views: ``(N, K, d)``; ``view_mask``: ``(N, K)``, ``True`` for real views.
    """
    b, m, d = queries.shape
    best, _ = max_over_views(view_scores(queries.reshape(b * m, d), views), view_mask[None])  # (B * m, N)
    return best.reshape(b, m, -1).masked_fill(~query_mask[..., None], 0).sum(dim=1)


def score_blocks(encoded: Sequence[np.ndarray], rows: int, max_scores: int) -> list[tuple[int, int]]:
    """``[start, end)`` runs of documents whose padded views times ``rows`` query vectors fit ``max_scores``."""
    out, start, width = [], 0, 0
    for i, e in enumerate(encoded):
        wider = max(width, e.shape[0], 1)
        if i > start and (i - start + 1) * wider * rows > max_scores:
            out.append((start, i))
            start, wider = i, max(e.shape[0], 1)
        width = wider
    out.append((start, len(encoded)))
    return out


@torch.inference_mode()
def mine_negatives(
    encoder,
    examples: Sequence[TrainingExample],
    corpus: Sequence[Passage],
    *,
    num_negatives: int = 30,
    depth: int = 100,
    batch_size: int = 64,
    text_of: Callable[[Passage], str] = _plain_text,
    query_chunk: int = 64,
    progress_bar: bool = False,
    max_scores: int = 1 << 26,
) -> dict[str, list[Passage]]:
    """
    Dense hard negatives from a trained checkpoint (the coCondenser / CAMVR two-round recipe).

    Encodes ``corpus`` (views) and the queries with ``encoder`` (``haystack_mvr.modeling.st_encoder.open_encoder``),
    ranks by MaxSim (exhaustive, on the encoder's device; a multi-view query is one vector, so its score is
    ``max_i f_i(q, d)``; a late-interaction (ColBERT) query sums each of its vectors' best token view) and keeps the
    best-ranked passages that are neither a positive nor hold an answer. Queries go ``query_chunk`` at a time against
    blocks of documents, each padded to its own longest, so about ``max_scores`` scores are held at a time.

    :returns: ``{query_id: [Passage, ...]}``, best-ranked first; write it with :func:`write_negatives`.
    """
    if not corpus:
        return {}
    queries = _unique_queries(examples)
    device = encoder.device
    encoded = [
        e.views
        for e in encoder.encode_documents(
            [text_of(p) for p in corpus], batch_size=batch_size, progress_bar=progress_bar
        )
    ]
    dim = encoded[0].shape[1]
    query_views = encoder.query_views(
        [e.query for e in queries.values()], batch_size=batch_size, progress_bar=progress_bar
    )
    rows = min(query_chunk, len(query_views)) * max(q.shape[0] for q in query_views)
    blocks = []
    for lo, hi in score_blocks(encoded, rows, max_scores):
        views, mask = padded_rows(encoded[lo:hi], dim)
        blocks.append((torch.from_numpy(views).to(device), torch.from_numpy(mask).to(device)))
    k = min(len(corpus), depth + max(len(e.positive_ids) for e in queries.values()))
    result: dict[str, list[Passage]] = {}
    items = list(queries.items())
    for start in range(0, len(items), query_chunk):
        chunk, chunk_mask = (
            torch.from_numpy(a).to(device) for a in padded_rows(query_views[start : start + query_chunk], dim)
        )
        scores = torch.cat([maxsim_scores(chunk, chunk_mask, views, mask) for views, mask in blocks], dim=1)
        top = scores.topk(k, dim=1).indices.cpu().tolist()
        for (qid, example), ranked in zip(items[start : start + query_chunk], top, strict=True):
            result[qid] = _select(example, ranked, corpus, num_negatives, text_of)
    return result


def write_negatives(path: str | Path, negatives: Mapping[str, Sequence[Passage]]) -> Path:
    """Write ``{query_id: [Passage, ...]}`` as JSONL (passages inline, so the file stands alone)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for qid, passages in negatives.items():
            record = {"query_id": qid, "negatives": [{"id": p.id, "title": p.title, "text": p.text} for p in passages]}
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def read_negatives(path: str | Path) -> dict[str, list[Passage]]:
    """Read a negatives JSONL written by :func:`write_negatives`; a bad record names its file, line and field."""
    result: dict[str, list[Passage]] = {}
    for where, record in read_jsonl(path, missing_hint="write one with `haystack-mvr mine-negatives`"):
        qid = record.get("query_id")
        if not isinstance(qid, str) or not qid:
            msg = f"{where}: field 'query_id' must be a non-empty string."
            raise ValueError(msg)
        negatives = record.get("negatives")
        if not isinstance(negatives, list):
            msg = f"{where}: field 'negatives' must be a list of {{id, title, text}} objects."
            raise ValueError(msg)
        passages = []
        for i, n in enumerate(negatives):
            ok = isinstance(n, dict) and isinstance(n.get("id"), str) and isinstance(n.get("text"), str)
            if not ok or not n["text"].strip():
                msg = f"{where}: field 'negatives[{i}]' needs a string 'id' and a non-empty string 'text'."
                raise ValueError(msg)
            passages.append(Passage(id=n["id"], title=str(n.get("title") or ""), text=n["text"]))
        result.setdefault(qid, []).extend(passages)
    return result
