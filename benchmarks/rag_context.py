"""Context at a budget (issue 38): how often the context a prompt gets holds the answer, at 64-1,024 tokens.

    python -m benchmarks.rag_retrieval --tier pages     # once: indexes and rankings (cached in runs/rag)
    python -m benchmarks.rag_context --tier pages

For every dev question of the tier, each context below is filled up to B tokens (the packaged all-MiniLM-L6-v2
WordPiece tokenizer, no special tokens, also the extractive reader's) and checked for the answer string (DPR
``has_answer``, the same match as every other answer-in-context figure here):

- ``builder after hybrid`` / ``builder after multi-view``: ``MultiViewContextBuilder(budget_tokens=B)`` over the top
  10 documents of the convex hybrid (BM25 0.4 + multi-view 0.6) or of the multi-view retriever, every candidate's
  views scored by the store;
- ``matched snippets``: each multi-view document's matched snippet (``mvr_matched_text``), documents in rank order;
- ``chunks``: Haystack's chunking as users build it (3-sentence ``DocumentSplitter`` chunks, MiniLM, best first);
- ``chunks + sentence window``: those chunks, each widened by ``SentenceWindowRetriever(window_size=1)``;
- ``BM25 documents`` / ``hybrid documents``: the top documents whole, from their first word, in rank order;
- ``gold ceiling``: B tokens of the gold document centred on the answer.

A context that would pass B is cut at a token boundary (baselines) or at a sentence (the builder; see its
docstring). Text already in the context is never counted twice (overlapping chunk windows add only new text).

Writes benchmarks/results/rag_context.<tier>.json / .md and, for the readers (benchmarks/rag_answers.py), each
question's contexts as ``[document id, start, end]`` spans in runs/rag/<tier>/contexts-<split>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # before numpy and torch load: they size their thread pools then
    from benchmarks.harness import pin_threads

    pin_threads(default=1)

import numpy as np
from haystack import Document

from benchmarks.harness import RESULTS
from benchmarks.rag_retrieval import CACHE, KEEP, TIERS, Tier, load_rag_tier, multi_view_store
from haystack_mvr.evaluation.answer_matching import has_answer

BUDGETS = (64, 128, 256, 512, 1024)
BUILDER_ROWS = {"builder after hybrid": "hybrid", "builder after multi-view": "multi-view"}
ROWS = (
    "builder after hybrid",
    "builder after multi-view",
    "matched snippets",
    "chunks",
    "chunks + sentence window",
    "BM25 documents",
    "hybrid documents",
    "gold ceiling",
)
WHOLE_DOCUMENTS = 3  # readers' "whole documents" rows read the top 3 documents whole
Span = list  # [document id, start, end]


class TokenBudgetCounter:
    """WordPiece token counts (no special tokens) and token-boundary cuts with the packaged MiniLM tokenizer: the
    package's own ``TokenizerCounter`` (what ``MultiViewContextBuilder`` and the generative reader count with), one
    text at a time, plus the window around an answer."""

    def __init__(self, path: str) -> None:
        from transformers import AutoTokenizer

        from haystack_mvr.token_budget import TokenizerCounter

        self.path = path
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.counter = TokenizerCounter(self.tokenizer, cached=0)

    def count(self, text: str) -> int:
        return self.counter.count([text])[0]

    def cut(self, text: str, tokens: int) -> str:
        """The longest prefix of ``text`` of at most ``tokens`` tokens, ending at a token boundary."""
        from haystack_mvr.token_budget import cut_text

        return cut_text(self.counter, text, tokens)

    def window(self, text: str, center: int, tokens: int) -> tuple[int, int]:
        """The character span of ``tokens`` tokens of ``text`` centred on character ``center``."""
        offsets = self.counter.offsets(text)
        if len(offsets) <= tokens:
            return 0, len(text)
        at = next((i for i, (s, e) in enumerate(offsets) if e > center), len(offsets) - 1)
        lo = max(0, min(at - tokens // 2, len(offsets) - tokens))
        return offsets[lo][0], offsets[lo + tokens - 1][1]


def fill(spans: Sequence[Span], texts: dict[str, str], budget: int, counter: TokenBudgetCounter) -> list[Span]:
    """``spans`` in order, each without the text already taken, until ``budget`` tokens (the last one cut)."""
    taken: dict[str, list[tuple[int, int]]] = {}
    out: list[Span] = []
    used = 0
    for doc_id, start, end in spans:
        for lo, hi in uncovered(taken.get(doc_id, []), start, end):
            text = texts[doc_id][lo:hi]
            n = counter.count(text)
            if used + n > budget:
                cut = counter.cut(text, budget - used)
                if cut.strip():
                    out.append([doc_id, lo, lo + len(cut)])
                return out
            out.append([doc_id, lo, hi])
            taken.setdefault(doc_id, []).append((lo, hi))
            used += n
    return out


def uncovered(taken: list[tuple[int, int]], start: int, end: int) -> list[tuple[int, int]]:
    """The parts of ``[start, end)`` outside every interval in ``taken``."""
    parts = [(start, end)]
    for lo, hi in taken:
        parts = [p for a, b in parts for p in ((a, min(b, lo)), (max(a, hi), b)) if p[0] < p[1]]
    return parts


def context_text(spans: Sequence[Span], texts: dict[str, str]) -> str:
    return "\n\n".join(texts[d][s:e] for d, s, e in spans)


def builder_contexts(
    store, counter: TokenBudgetCounter, budgets: Sequence[int]
) -> Callable[..., dict[int, list[Span]]]:
    """``MultiViewContextBuilder`` at each budget, as a function of (candidate documents, query vector)."""
    from haystack_mvr.components.builders import SOURCE_ID_KEY, SOURCE_SPAN_KEY, MultiViewContextBuilder

    builder = MultiViewContextBuilder(document_store=store, budget_tokens=max(budgets), tokenizer=counter.path)
    builder.warm_up()

    def build(candidates, query: np.ndarray) -> dict[int, list[Span]]:
        out = {}
        for budget in budgets:
            pieces = builder.run(documents=candidates, query_embedding=query.tolist(), budget_tokens=budget)
            out[budget] = [[p.meta[SOURCE_ID_KEY], *p.meta[SOURCE_SPAN_KEY]] for p in pieces["documents"]]
        return out

    return build


def question_contexts(
    row: dict[str, Any], question, texts: dict[str, str], by_id, query: np.ndarray, build, counter, budgets
) -> dict[str, dict[Any, list[Span]]]:
    """Every context of one question: ``{row name: {budget or "whole": spans}}``."""
    out: dict[str, dict[Any, list[Span]]] = {}
    for name, system in BUILDER_ROWS.items():
        candidates = [  # the upstream's documents with the upstream's scores, as a pipeline hands them on
            Document(id=doc_id, content=by_id[doc_id].content, meta=by_id[doc_id].meta, score=score)
            for doc_id, score, *_ in row[system][:KEEP]
        ]
        out[name] = build(candidates, query)
    matched = [[d, *span] for d, _, span in row["multi-view"] if span is not None]
    documents = {
        "BM25 documents": [[d, 0, len(texts[d])] for d, _ in row["bm25"]],
        "hybrid documents": [[d, 0, len(texts[d])] for d, _ in row["hybrid"]],
    }
    sources = {
        "matched snippets": matched,
        "chunks": row["chunks"],
        "chunks + sentence window": row["windows"],
        **documents,
    }
    for name, spans in sources.items():
        out[name] = {b: fill(spans, texts, b, counter) for b in budgets}
    for name, spans in documents.items():
        out[name]["whole"] = spans[:WHOLE_DOCUMENTS]
    gold = question.positive_id
    text = texts[gold]
    at = next((text.find(a) for a in question.answers if a and text.find(a) >= 0), 0)
    out["gold ceiling"] = {b: [[gold, *counter.window(text, at, b)]] for b in budgets}
    out["gold ceiling"]["whole"] = [[gold, 0, len(text)]]
    return out


def measure(tier: Tier, split: str, cache: Path, model: str, budgets: Sequence[int], limit: int | None):
    """The sampled questions, their contexts, the texts, and the tune-queries folder of the queries (None: model)."""
    retrieved = json.loads((cache / f"retrieved-{split}.json").read_text(encoding="utf-8"))
    queries = np.load(cache / f"queries-{split}.npy")
    questions = tier.questions
    rows = retrieved["rows"]
    order = list(range(len(questions)))
    if limit is not None and limit < len(order):
        random.Random(0).shuffle(order)
        order = sorted(order[:limit])
    if [q.id for q in questions] != [r["id"] for r in rows]:
        raise SystemExit(f"{cache}/retrieved-{split}.json was made for other questions: run rag_retrieval again.")
    store, _ = multi_view_store(tier, model, cache / "multi-view")
    counter = TokenBudgetCounter(model)
    texts = {d.id: d.content for d in tier.documents}
    by_id = tier.by_id()
    build = builder_contexts(store, counter, budgets)
    contexts, seconds = [], []
    start = time.perf_counter()
    for n, i in enumerate(order, 1):
        t0 = time.perf_counter()
        contexts.append(question_contexts(rows[i], questions[i], texts, by_id, queries[i], build, counter, budgets))
        seconds.append(time.perf_counter() - t0)
        if n % 200 == 0 or n == len(order):
            print(f"  {tier.name} {split}: contexts of {n}/{len(order)} ({time.perf_counter() - start:.0f} s)")
    return [questions[i] for i in order], contexts, texts, retrieved.get("query_model")


def summarize(questions, contexts, texts, counter: TokenBudgetCounter, budgets) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for name in ROWS:
        cells = {}
        for b in budgets:
            hits = [
                has_answer(q.answers, context_text(c[name][b], texts)) for q, c in zip(questions, contexts, strict=True)
            ]
            tokens = [sum(counter.count(texts[d][s:e]) for d, s, e in c[name][b]) for c in contexts[:200]]
            pieces = [len(c[name][b]) for c in contexts]
            cells[str(b)] = {
                "answer_in_context": round(100 * sum(hits) / len(hits), 1),
                "tokens_mean_first200": round(statistics.fmean(tokens), 1),
                "pieces_mean": round(statistics.fmean(pieces), 2),
            }
        table[name] = cells
    return table


def markdown(payload: dict[str, Any]) -> str:
    budgets = payload["budgets"]
    lines = [
        f"# Context at a budget: {payload['tier']} ({payload['questions']} {payload['split']} questions)",
        "",
        payload["note"],
        "",
        "Answer in the context (%), the context filled up to B MiniLM WordPiece tokens:",
        "",
        "| context | " + " | ".join(f"{b:,}" for b in budgets) + " |",
        "|---|" + "---:|" * len(budgets),
    ]
    for name, cells in payload["table"].items():
        lines.append(f"| {name} | " + " | ".join(f"{cells[str(b)]['answer_in_context']:.1f}" for b in budgets) + " |")
    lines += ["", "Pieces per question (mean):", "", "| context | " + " | ".join(f"{b:,}" for b in budgets) + " |"]
    lines.append("|---|" + "---:|" * len(budgets))
    for name, cells in payload["table"].items():
        lines.append(f"| {name} | " + " | ".join(f"{cells[str(b)]['pieces_mean']:.2f}" for b in budgets) + " |")
    lines += ["", f"Machine: {payload['machine']}. {payload['timing']}", ""]
    return "\n".join(lines)


def tune(tier: Tier, cache: Path, model: str, budgets, n: int, weights, piece_tokens) -> dict[str, Any]:
    """Answer in context of the builder after the hybrid on ``n`` training questions (evenly spread, never dev), for
    each ``upstream_weight`` x ``piece_tokens``: how the builder's defaults were chosen."""
    from haystack_mvr.components.builders import SOURCE_ID_KEY, SOURCE_SPAN_KEY, MultiViewContextBuilder

    retrieved = json.loads((cache / "retrieved-train.json").read_text(encoding="utf-8"))
    queries = np.load(cache / "queries-train.npy")
    picks = [i * len(tier.questions) // n for i in range(n)]
    store, _ = multi_view_store(tier, model, cache / "multi-view")
    counter = TokenBudgetCounter(model)
    texts = {d.id: d.content for d in tier.documents}
    by_id = tier.by_id()
    table: dict[str, dict[str, float]] = {}
    for weight in weights:
        for size in piece_tokens:
            builder = MultiViewContextBuilder(
                document_store=store, tokenizer=model, piece_tokens=size, upstream_weight=weight
            )
            builder.warm_up()
            hits = dict.fromkeys(budgets, 0)
            for i in picks:
                row, question = retrieved["rows"][i], tier.questions[i]
                candidates = [
                    Document(id=d, content=by_id[d].content, meta=by_id[d].meta, score=score)
                    for d, score in row["hybrid"]
                ]
                for b in budgets:
                    pieces = builder.run(documents=candidates, query_embedding=queries[i].tolist(), budget_tokens=b)
                    spans = [[p.meta[SOURCE_ID_KEY], *p.meta[SOURCE_SPAN_KEY]] for p in pieces["documents"]]
                    hits[b] += has_answer(question.answers, context_text(spans, texts))
            key = f"upstream_weight={weight}, piece_tokens={size}"
            table[key] = {str(b): round(100 * hits[b] / n, 1) for b in budgets}
            print(key, table[key], flush=True)
    hybrid = {str(b): 0 for b in budgets}
    for i in picks:
        row, question = retrieved["rows"][i], tier.questions[i]
        spans = [[d, 0, len(texts[d])] for d, _ in row["hybrid"]]
        for b in budgets:
            hybrid[str(b)] += has_answer(question.answers, context_text(fill(spans, texts, b, counter), texts))
    table["hybrid documents (reference)"] = {b: round(100 * v / n, 1) for b, v in hybrid.items()}
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", choices=TIERS, required=True)
    parser.add_argument("--split", choices=("dev", "train"), default="dev")
    parser.add_argument("--questions", type=int, default=None, help="A fixed random sample (seed 0) of the split.")
    parser.add_argument("--budgets", type=int, nargs="+", default=list(BUDGETS))
    parser.add_argument("--model", default=None)
    parser.add_argument("--cache-dir", type=Path, default=CACHE)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-results", action="store_true", help="Write only the contexts file (training splits).")
    parser.add_argument("--tune", type=int, default=None, metavar="N", help="Tune the builder on N training questions.")
    parser.add_argument("--weights", type=float, nargs="+", default=[0.0, 0.1, 0.3, 1.0])
    parser.add_argument("--piece-tokens", type=int, nargs="+", default=[128, 256])
    parser.add_argument(
        "--name",
        default=None,
        help="Results as rag_context.<tier>[.<questions>].<name> (with --tune: rag_context.<tier>.tune.<name>).",
    )
    args = parser.parse_args()
    import platform

    import torch

    from benchmarks.packaged_model import packaged_minilm

    torch.set_num_threads(args.threads)
    model = args.model or packaged_minilm()
    if args.tune:
        tier = load_rag_tier(args.tier, "train")
        table = tune(tier, args.cache_dir / args.tier, model, args.budgets, args.tune, args.weights, args.piece_tokens)
        payload = {"tier": args.tier, "questions": args.tune, "split": "train (evenly spread)", "table": table}
        stem = f"rag_context.{args.tier}.tune" + (f".{args.name}" if args.name else "")
        (RESULTS / f"{stem}.json").write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
        lines = [f"# Builder settings on {args.tune} training questions: {args.tier}", "", "Answer in context (%):", ""]
        lines += [
            "| setting | " + " | ".join(str(b) for b in args.budgets) + " |",
            "|---|" + "---:|" * len(args.budgets),
        ]
        lines += [f"| {k} | " + " | ".join(f"{v[str(b)]:.1f}" for b in args.budgets) + " |" for k, v in table.items()]
        lines += ["", f"Command: python -m benchmarks.rag_context --tier {args.tier} --tune {args.tune}", ""]
        (RESULTS / f"{stem}.md").write_text("\n".join(lines), encoding="utf-8")
        return
    tier = load_rag_tier(args.tier, args.split)
    cache = args.cache_dir / args.tier
    start = time.perf_counter()
    questions, contexts, texts, query_model = measure(tier, args.split, cache, model, args.budgets, args.questions)
    seconds = time.perf_counter() - start
    out = cache / f"contexts-{args.split}.json"
    out.write_text(
        json.dumps({"question_ids": [q.id for q in questions], "budgets": args.budgets, "contexts": contexts}) + "\n",
        encoding="utf-8",
    )
    print(f"wrote {out}")
    if args.no_results:
        return
    counter = TokenBudgetCounter(model)
    payload = {
        "tier": args.tier,
        "split": args.split,
        "questions": len(questions),
        "budgets": args.budgets,
        "note": (
            "Each question's top 10 documents from each system (benchmarks/rag_retrieval.py, all-MiniLM-L6-v2 "
            + (f"documents, multi-view queries by {query_model}" if query_model else "zero-shot")
            + "); the builder with its defaults (piece_tokens 64, order by score, whole document if it fits). "
            "Command: python -m benchmarks.rag_context --tier "
            + args.tier
            + ("" if args.cache_dir == CACHE else f" --cache-dir {args.cache_dir}")
            + ("" if args.questions is None else f" --questions {args.questions}")
            + ("" if args.name is None else f" --name {args.name}")
        ),
        "machine": f"{platform.machine()} {os.cpu_count()} cores, torch {torch.__version__}, {args.threads} thread(s)",
        "timing": f"Contexts for all rows and budgets: {seconds / len(questions) * 1000:.0f} ms a question.",
        "table": summarize(questions, contexts, texts, counter, args.budgets),
    }
    name = f"rag_context.{args.tier}" + ("" if args.questions is None else f".{args.questions}")
    name += f".{args.name}" if args.name else ""
    (RESULTS / f"{name}.json").write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    (RESULTS / f"{name}.md").write_text(markdown(payload), encoding="utf-8")
    print(markdown(payload))


if __name__ == "__main__":
    main()
