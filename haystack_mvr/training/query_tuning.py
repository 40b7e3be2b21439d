"""
Query-side tuning against a frozen index (DensePhrases §4.3, with CAMVR's answer-view supervision): only a copy of
the query encoder learns; the documents' views stay exactly as the store holds them, so nothing is re-encoded.

Each step encodes a batch of questions with gradients and scores them against their candidate documents' frozen
views at the store's own scoring: a one-vector query by its best view (``max_i <q, v_i>``), a multi-vector query by
MaxSim divided by its vector count. A question's candidates are its gold document, its hard negatives (mined once,
before training, from the frozen views with the untuned query encoder: the best-ranked documents that are not gold
and do not hold an answer) and every other candidate of the batch. The loss is cross-entropy over them at
``scale``; with answer-view supervision a one-vector query's gold score is the best of the views whose span holds
the answer (CAMVR's answer view), so the query learns to hit the view that holds what it asks, which is also the view
the context builder reads first.

The tuned folder loads as any encoder (``MultiViewTextEmbedder(model=folder)``) and names the document encoder it
was tuned against (``query_tuning.json``): its identity is that encoder's, so a store of those views accepts it and
any other store refuses it.
"""

from __future__ import annotations

import copy
import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from haystack_mvr.modeling.query_tuning_record import QUERY_TUNING_FILE, tuned_record
from haystack_mvr.modeling.snippets import Span
from haystack_mvr.training.negatives import maxsim_scores, padded_rows, score_blocks


@dataclass
class FrozenDocument:
    """A stored document as the index holds it: its views ``(k, d)`` float32, their spans in ``content``."""

    id: str
    views: np.ndarray
    spans: list[Span | None]
    content: str


@dataclass
class TuningQuestion:
    """A question, its gold document and (optionally) its answers with their offsets in the gold ``content``."""

    question: str
    positive_id: str
    answers: list[str] = field(default_factory=list)
    answer_starts: list[int] = field(default_factory=list)


@dataclass
class QueryTuningArguments:
    """What ``haystack-mvr tune-queries`` takes (every field a flag)."""

    max_steps: int = 300
    batch_size: int = 32
    learning_rate: float = 2e-5
    negatives: int = 7  # hard negatives a question, mined from the frozen views (0: in-batch only)
    scale: float = 20.0  # logits = scale * score (scores are cosines for normalising encoders)
    answer_views: bool = True  # CAMVR's answer-view supervision for one-vector queries
    lora_rank: int = 0  # 0: tune every weight of the query encoder; r: a rank-r LoRA, merged on save
    max_minutes: float | None = None
    warmup_ratio: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("max_steps", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                msg = f"{name} must be a positive integer, got {value!r}."
                raise ValueError(msg)
        for name in ("negatives", "lora_rank", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                msg = f"{name} must be a non-negative integer, got {value!r}."
                raise ValueError(msg)
        for name in ("learning_rate", "scale"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                msg = f"{name} must be a finite positive number, got {value!r}."
                raise ValueError(msg)
        if not 0 <= self.warmup_ratio < 1:
            msg = f"warmup_ratio must be in [0, 1), got {self.warmup_ratio!r}."
            raise ValueError(msg)
        if self.max_minutes is not None and not (math.isfinite(self.max_minutes) and self.max_minutes > 0):
            msg = f"max_minutes must be a finite positive number of minutes, got {self.max_minutes!r}."
            raise ValueError(msg)


@dataclass
class TuningReport:
    """What a run did: steps, seconds, the loss of its first and last steps, and how many answer views it used."""

    steps: int
    seconds: float
    first_loss: float
    last_loss: float
    questions: int
    answer_view_questions: int
    stopped_by_time: bool


def answer_view_indices(document: FrozenDocument, question: TuningQuestion) -> list[int]:
    """The views whose span holds an answer: at its given offset, else where the answer first occurs in the text
    (case-insensitive); a token view counts when it lies inside the answer. ``[]`` when none does."""
    spans: list[tuple[int, int]] = []
    lower = document.content.lower()
    for i, answer in enumerate(question.answers):
        if not answer:
            continue
        start = question.answer_starts[i] if i < len(question.answer_starts) else -1
        if not (start >= 0 and document.content[start : start + len(answer)] == answer):
            start = lower.find(answer.lower())
        if start >= 0:
            spans.append((start, start + len(answer)))
    out = []
    for v, span in enumerate(document.spans):
        if span is None:
            continue
        s, e = span
        holds = any(s <= a and b <= e for a, b in spans)
        inside = any(a <= s and e <= b for a, b in spans)
        if holds or inside:
            out.append(v)
    return out


def query_forward(model, texts: list[str]) -> tuple[Tensor, Tensor]:
    """A batch of queries through ``model`` (a ``MultiVectorEncoder``) with gradients: vectors ``(B, m, d)`` and the
    mask of the ones that count ``(B, m)`` (a one-vector query: ``m = 1``), as ``encode_query`` computes them."""
    prompt = model.prompts.get("query") or None
    features = model.preprocess(texts, prompt=prompt, task="query")
    features = {k: v.to(model.device) if isinstance(v, Tensor) else v for k, v in features.items()}
    out = model(features, task="query")
    vectors, mask = out["token_embeddings"], out["attention_mask"].bool()
    return vectors, mask


def _one_vector(encoder) -> bool:
    return not getattr(encoder, "late_interaction", False)


def _query_tensors(encoder, texts: list[str]) -> tuple[Tensor, Tensor]:
    vectors, mask = query_forward(encoder.model, texts)
    if _one_vector(encoder):  # the pooled query vector is the first row (MVR Eq. 4)
        return vectors[:, :1], torch.ones(vectors.shape[0], 1, dtype=torch.bool, device=vectors.device)
    return vectors, mask


@torch.inference_mode()
def mine_frozen_negatives(
    encoder,
    documents: Sequence[FrozenDocument],
    questions: Sequence[TuningQuestion],
    num_negatives: int,
    *,
    batch_size: int = 64,
    max_scores: int = 1 << 26,
    progress_bar: bool = False,
) -> list[list[int]]:
    """Each question's ``num_negatives`` best-ranked documents (indices) by the untuned query against the frozen
    views, never its gold document nor one whose text holds an answer."""
    if num_negatives == 0 or not documents:
        return [[] for _ in questions]
    dim = documents[0].views.shape[1]
    query_views = encoder.query_views([q.question for q in questions], batch_size=batch_size)
    rows = min(batch_size, len(query_views)) * max(q.shape[0] for q in query_views)
    views = [d.views for d in documents]
    blocks = []
    for lo, hi in score_blocks(views, rows, max_scores):
        padded, mask = padded_rows(views[lo:hi], dim)
        blocks.append((torch.from_numpy(padded), torch.from_numpy(mask)))
    index = {d.id: i for i, d in enumerate(documents)}
    lowered: dict[int, str] = {}
    depth = min(len(documents), num_negatives * 3 + 1)
    out: list[list[int]] = []
    for start in tqdm(range(0, len(questions), batch_size), disable=not progress_bar, desc="Mining negatives"):
        chunk, chunk_mask = (torch.from_numpy(a) for a in padded_rows(query_views[start : start + batch_size], dim))
        scores = torch.cat([maxsim_scores(chunk, chunk_mask, v, m) for v, m in blocks], dim=1)
        for question, ranked in zip(
            questions[start : start + batch_size], scores.topk(depth, dim=1).indices.tolist(), strict=True
        ):
            gold = index[question.positive_id]
            answers = [a.lower() for a in question.answers if a]
            kept = []
            for i in ranked:
                if i == gold:
                    continue
                if answers:
                    text = lowered.setdefault(i, documents[i].content.lower())
                    if any(a in text for a in answers):
                        continue
                kept.append(i)
                if len(kept) == num_negatives:
                    break
            out.append(kept)
    return out


def _candidate_scores(
    query: Tensor, query_mask: Tensor, views: Tensor, view_mask: Tensor, one_vector: bool
) -> tuple[Tensor, Tensor]:
    """Scores ``(B, C)`` at the store's scoring (MaxSim over the query's vector count) and, for one-vector queries,
    the view scores ``(B, C, K)`` (``None`` otherwise)."""
    if one_vector:
        per_view = torch.einsum("bd,ckd->bck", query[:, 0], views)
        per_view = per_view.masked_fill(~view_mask[None], torch.finfo(per_view.dtype).min)
        return per_view.max(dim=-1).values, per_view
    scores = maxsim_scores(query, query_mask, views, view_mask)
    return scores / query_mask.sum(dim=1, keepdim=True).clamp(min=1), None


def _add_lora(model, rank: int):
    """A rank-``rank`` LoRA on the query backbone's attention and feed-forward projections (peft)."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError as e:
        msg = 'lora_rank needs peft: pip install "haystack-mvr[generative]" (or set lora_rank to 0).'
        raise ImportError(msg) from e
    transformer = model[0]
    names = {n.rsplit(".", 1)[-1] for n, m in transformer.model.named_modules() if isinstance(m, torch.nn.Linear)}
    targets = sorted(
        names & {"query", "key", "value", "dense", "q_proj", "k_proj", "v_proj", "o_proj", "q", "k", "v", "o"}
    )
    config = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules=targets or None)
    transformer.model = get_peft_model(transformer.model, config)
    return transformer


def tune_query_encoder(
    encoder,
    documents: Sequence[FrozenDocument],
    questions: Sequence[TuningQuestion],
    args: QueryTuningArguments,
    *,
    progress_bar: bool = False,
    log: Callable[[dict[str, Any]], None] | None = None,
):
    """
    Tune a copy of ``encoder`` (an encoder ``open_encoder`` gives: the one that built ``documents``' views) on
    ``questions``; ``documents`` are never re-encoded. Returns ``(tuned encoder, TuningReport)``.

    :raises ValueError: no questions, a question whose gold document is not in ``documents``, views of another
        width than the encoder's.
    """
    if not questions:
        msg = "No questions to tune on."
        raise ValueError(msg)
    index = {d.id: i for i, d in enumerate(documents)}
    for n, q in enumerate(questions, 1):
        if q.positive_id not in index:
            msg = f"Question {n} ({q.question[:60]!r}): positive_id {q.positive_id!r} is not in the index."
            raise ValueError(msg)
    dims = {d.views.shape[1] for d in documents if len(d.views)}
    if dims != {encoder.embedding_dim}:
        msg = f"The index holds {sorted(dims)}-dimensional views but the encoder gives {encoder.embedding_dim}."
        raise ValueError(msg)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    one_vector = _one_vector(encoder)
    negatives = mine_frozen_negatives(encoder, documents, questions, args.negatives, progress_bar=progress_bar)
    answer_views = [
        answer_view_indices(documents[index[q.positive_id]], q) if (args.answer_views and one_vector) else []
        for q in questions
    ]
    tuned = copy.deepcopy(encoder)
    tuned.model.train()
    if args.lora_rank:
        _add_lora(tuned.model, args.lora_rank)
    parameters = [p for p in tuned.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=args.learning_rate, weight_decay=0.01)
    warmup = max(1, int(args.warmup_ratio * args.max_steps))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (args.max_steps - s) / max(1, args.max_steps - warmup)))
    )
    order: list[int] = []
    start, losses, stopped = time.perf_counter(), [], False
    bar = tqdm(total=args.max_steps, disable=not progress_bar, desc="Tuning queries")
    for step in range(args.max_steps):
        if args.max_minutes is not None and time.perf_counter() - start > 60 * args.max_minutes:
            stopped = True
            break
        if len(order) < args.batch_size:
            more = list(range(len(questions)))
            random.shuffle(more)
            order.extend(more)
        batch, order = order[: args.batch_size], order[args.batch_size :]
        columns: dict[int, int] = {}
        for b in batch:
            for doc in (index[questions[b].positive_id], *negatives[b]):
                columns.setdefault(doc, len(columns))
        docs = list(columns)
        views, view_mask = (
            torch.from_numpy(a) for a in padded_rows([documents[d].views for d in docs], encoder.embedding_dim)
        )
        query, query_mask = _query_tensors(tuned, [questions[b].question for b in batch])
        scores, per_view = _candidate_scores(query.float(), query_mask, views, view_mask, one_vector)
        target = torch.tensor([columns[index[questions[b].positive_id]] for b in batch])
        if per_view is not None:  # the answer view stands for its gold document
            gold_scores = []
            for row, b in enumerate(batch):
                held = answer_views[b]
                own = per_view[row, target[row]]
                gold_scores.append(own[held].max() if held else scores[row, target[row]])
            scores = scores.clone()
            scores[torch.arange(len(batch)), target] = torch.stack(gold_scores)
        loss = torch.nn.functional.cross_entropy(args.scale * scores, target)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(parameters, 1.0)
        optimizer.step()
        schedule.step()
        losses.append(float(loss.detach()))
        bar.update(1)
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
        if log is not None:
            log({"step": step + 1, "loss": losses[-1], "lr": schedule.get_last_lr()[0]})
    bar.close()
    if args.lora_rank:
        transformer = tuned.model[0]
        transformer.model = transformer.model.merge_and_unload()
    tuned.model.eval()
    tuned._identity = None
    report = TuningReport(
        steps=len(losses),
        seconds=round(time.perf_counter() - start, 1),
        first_loss=round(float(np.mean(losses[:10])), 4) if losses else float("nan"),
        last_loss=round(float(np.mean(losses[-10:])), 4) if losses else float("nan"),
        questions=len(questions),
        answer_view_questions=sum(bool(a) for a in answer_views),
        stopped_by_time=stopped,
    )
    return tuned, report


def save_tuned_query_encoder(
    tuned, output: str | Path, document_encoder: dict[str, Any], args: QueryTuningArguments, report: TuningReport
) -> Path:
    """Save the tuned encoder to ``output`` with ``query_tuning.json``: the identity of the document encoder it was
    tuned against, the arguments and the report."""
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    tuned.model.save(str(output))
    record = tuned_record(document_encoder, query_fingerprint=tuned.fingerprint(), kind=type(tuned).__name__)
    record.update({"arguments": asdict(args), "report": asdict(report)})
    (output / QUERY_TUNING_FILE).write_text(json.dumps(record, indent=2, default=str), encoding="utf-8")
    return output
