"""The context builder on a ColBERT's token views (issue 49): answer in context at 64-1,024 tokens on pages dev.

    python -m benchmarks.rag_retrieval --tier pages                                  # once: the snippet rankings
    python -m benchmarks.late_interaction --tier pages --model runs/colbert-minilm   # once: the ColBERT's store
    python -m benchmarks.late_interaction_context --model runs/colbert-minilm --questions 400

On a fixed sample of the pages tier's dev questions (seed 0, as ``rag_context --questions`` draws it), each context is
filled up to B packaged-MiniLM WordPiece tokens and checked for the answer (DPR ``has_answer``), as in
``benchmarks/rag_context.py``, whose functions this reuses:

- ``builder after ColBERT``: ``MultiViewContextBuilder`` (defaults, as rag_context uses it) over the ColBERT's top 10
  documents (exact MaxSim, the Flat store ``late_interaction.py`` caches), given the ColBERT's ``packed_embedding``
  (every query vector: token views are scored by ``token_match_scores``);
- ``builder after ColBERT hybrid``: the same over the top 10 of BM25 0.4 + ColBERT 0.6 (convex,
  ``rag_retrieval.hybrid_pipeline`` with the ColBERT as its dense side, as ``late_interaction.py`` runs it);
- ``ColBERT documents`` / ``ColBERT hybrid documents``: those top documents whole, from their first word, in rank order
  (``rag_context.fill``);
- the snippet model's rows of ``rag_context`` (``builder after multi-view``, ``builder after hybrid``, ``matched
  snippets``, ``hybrid documents``), computed here by ``rag_context.question_contexts`` from its cached rankings and
  store for the same questions.

Also the builder's pieces per question, the share of its pieces that start and end at sentence boundaries (the
builder's policy: runs of whole sentences) and its median ms a question (all budgets, one builder run each, store
search included) on token views and on snippet views. Writes
``benchmarks/results/late_interaction_context.<tier>.{json,md}``.

Its first runs (50 questions) led to two changes in ``MultiViewContextBuilder`` for token views, recorded in
``BUILDER_CHANGES`` (the results' markdown repeats it): seeds are the sentences the token views fall in
(``token_seed_spans``), and ``token_match_scores`` is divided by the query's vector count. ``--upstream-weight``
sets the token builders' ``upstream_weight`` (1/32 orders the seeds as before the second change).
"""

from __future__ import annotations

import argparse
import json
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

from benchmarks.harness import RESULTS, machine_label, utc_now, write_results
from benchmarks.rag_context import (
    BUDGETS,
    TokenBudgetCounter,
    builder_contexts,
    context_text,
    fill,
    markdown,
    question_contexts,
)
from benchmarks.rag_retrieval import CACHE, KEEP, Tier, hybrid_pipeline, load_rag_tier, multi_view_store
from haystack_mvr.evaluation.answer_matching import has_answer
from haystack_mvr.modeling.sentence_splitting import sentence_spans

SNIPPET_ROWS = ("builder after multi-view", "builder after hybrid", "matched snippets", "hybrid documents")


def late_rows(label: str) -> tuple[dict[str, str], dict[str, str]]:
    """The builder rows and the whole-document rows of the late-interaction model called ``label``."""
    builders = {f"builder after {label}": "dense", f"builder after {label} hybrid": "joiner"}
    return builders, {f"{label} documents": "dense", f"{label} hybrid documents": "joiner"}


def row_names(label: str, chunk_words: int) -> tuple[str, ...]:
    builders, documents = late_rows(label)
    chunks = (f"{chunk_words}-word chunks, title in each",) if chunk_words else ()
    return (*builders, "builder after multi-view", "builder after hybrid", *chunks, *documents, *SNIPPET_ROWS[2:])


def chunk_ranker(tier: Tier, model: str, words: int) -> Callable[[str], list[Span]]:
    """Plain ``DocumentSplitter`` chunks of ``words`` words (a fifth overlapping), the title embedded in each
    (``chunk_baselines.chunk_store``): a question's chunks as spans of their documents, best first."""
    from haystack_integrations.components.embedders.sentence_transformers import SentenceTransformersTextEmbedder

    from benchmarks.chunk_baselines import chunk_store

    store, _ = chunk_store(tier.documents, model, words, words // 5, title=True)
    chunks = store.filter_documents()
    matrix = np.asarray([c.embedding for c in chunks], dtype=np.float32)
    spans = [[c.meta["source_id"], c.meta["split_idx_start"], c.meta["split_idx_start"] + len(c.content)]
             for c in chunks]  # fmt: skip
    texts = {d.id: d.content for d in tier.documents}
    for (d, s, e), c in zip(spans, chunks, strict=True):
        if texts[d][s:e] != c.content:
            raise SystemExit(f"a chunk of {d} is not the text at its split_idx_start: the spans would lie")
    embedder = SentenceTransformersTextEmbedder(model=model, progress_bar=False)
    embedder.warm_up()

    def rank(question: str) -> list[Span]:
        scores = matrix @ np.asarray(embedder.run(text=question)["embedding"], dtype=np.float32)
        return [spans[j] for j in np.argsort(-scores)[:100]]

    return rank


Span = list  # [document id, start, end]
BUILDER_CHANGES = (
    "Builder changes for token views, measured on 50 of these questions (the `--questions 50` sample), answer in "
    "context at 64 / 128 / 256 / 512 / 1,024 tokens, builder after ColBERT | after ColBERT hybrid: as first "
    "written, each token's span cut the sentences at every token, so pieces were runs of words (0.9% of pieces "
    "started and ended at sentence boundaries): 16 / 32 / 46 / 52 / 68 | 22 / 34 / 46 / 54 / 64. Seeds made the "
    "sentences the tokens fall in (`token_seed_spans`; 99.6% aligned): 22 / 34 / 52 / 58 / 88 | 26 / 30 / 50 / 60 / "
    "88. `token_match_scores` divided by the query's 32 vectors (a mean similarity, the scale `upstream_weight` = 1 "
    "is weighed against; before, peaks of ~10-20 left the upstream ranking, 0-1, little say): 38 / 58 / 80 / 90 / 90 "
    "| 44 / 68 / 90 / 94 / 94. Checked on 120 pages training questions (evenly spread, never dev), after the "
    "ColBERT hybrid, with the undivided scores at upstream_weight 0 / 1 / 8 / 32 / 128 (32 orders the seeds as "
    "dividing does): 34.2 / 40.0 / 53.3 / 62.5 / 85.0, 38.3 / 45.8 / 56.7 / 65.0 / 87.5, 45.0 / 57.5 / 67.5 / 81.7 / "
    "95.8, 47.5 / 67.5 / 88.3 / 95.0 / 95.0, 47.5 / 72.5 / 89.2 / 91.7 / 91.7 (after the ColBERT alone: 35.8 / 45.8 / "
    "55.0 / 64.2 / 88.3 at 1, 43.3 / 64.2 / 85.8 / 93.3 / 94.2 at 32)."
)


def sample(total: int, limit: int | None) -> list[int]:
    """The question indices ``rag_context --questions limit`` reads: a seed-0 shuffle's first ``limit``, sorted."""
    order = list(range(total))
    if limit is not None and limit < total:
        random.Random(0).shuffle(order)
        order = sorted(order[:limit])
    return order


def timed(build: Callable[..., Any], seconds: list[float]) -> Callable[..., Any]:
    """``build``, appending each call's seconds to ``seconds``."""

    def run(*args: Any) -> Any:
        start = time.perf_counter()
        out = build(*args)
        seconds.append(time.perf_counter() - start)
        return out

    return run


def packed_builder_contexts(
    store, counter: TokenBudgetCounter, budgets: Sequence[int], **options: Any
) -> Callable[..., dict[int, list]]:
    """``MultiViewContextBuilder`` at each budget, as a function of (candidates, packed query, encoder): what
    ``rag_context.builder_contexts`` does with a one-vector query, for a late-interaction model's packed one."""
    from haystack_mvr.components.builders import SOURCE_ID_KEY, SOURCE_SPAN_KEY, MultiViewContextBuilder

    builder = MultiViewContextBuilder(
        document_store=store, budget_tokens=max(budgets), tokenizer=counter.path, **options
    )
    builder.warm_up()

    def build(candidates: list[Document], packed: str, encoder: dict[str, Any]) -> dict[int, list[Span]]:
        out = {}
        for budget in budgets:
            pieces = builder.run(
                documents=candidates, packed_query_embedding=packed, budget_tokens=budget, encoder=encoder
            )
            out[budget] = [[p.meta[SOURCE_ID_KEY], *p.meta[SOURCE_SPAN_KEY]] for p in pieces["documents"]]
        return out

    return build


def sentence_aligned(spans: Sequence[Span], bounds: dict[str, tuple[set[int], set[int]]]) -> tuple[int, int]:
    """``(pieces starting and ending at a sentence boundary, pieces)``; ``bounds``: each document's sentence starts
    and ends (``sentence_spans``, the builder's own splitter)."""
    aligned = sum(s in bounds[d][0] and e in bounds[d][1] for d, s, e in spans)
    return aligned, len(spans)


def summarize(questions, contexts, texts, counter: TokenBudgetCounter, budgets, rows: Sequence[str]) -> dict[str, Any]:
    """``rag_context.summarize`` for ``rows``: answer in context %, tokens (first 200 questions) and pieces."""
    table: dict[str, dict[str, Any]] = {}
    for name in rows:
        cells = {}
        for b in budgets:
            pairs = zip(questions, contexts, strict=True)
            hits = [has_answer(q.answers, context_text(c[name][b], texts)) for q, c in pairs]
            tokens = [sum(counter.count(texts[d][s:e]) for d, s, e in c[name][b]) for c in contexts[:200]]
            cells[str(b)] = {
                "answer_in_context": round(100 * sum(hits) / len(hits), 1),
                "tokens_mean_first200": round(statistics.fmean(tokens), 1),
                "pieces_mean": round(statistics.fmean(len(c[name][b]) for c in contexts), 2),
            }
        table[name] = cells
    return table


def measure(
    tier: Tier,
    cache: Path,
    colbert: str,
    minilm: str,
    budgets: Sequence[int],
    limit: int | None,
    tokens: bool = False,
    chunk_words: int = 0,
    **options: Any,
):
    """Every row's contexts for the sampled dev questions, and the builders' seconds a question. ``tokens``: the
    packaged MiniLM's zero-shot token views (``mode="tokens"``) stand where the ColBERT does."""
    retrieved = json.loads((cache / "retrieved-dev.json").read_text(encoding="utf-8"))
    queries = np.load(cache / "queries-dev.npy")
    if [q.id for q in tier.questions] != [r["id"] for r in retrieved["rows"]]:
        raise SystemExit(f"{cache}/retrieved-dev.json was made for other questions: run rag_retrieval again.")
    encoder_kwargs = {"mode": "tokens"} if tokens else None
    info_path = cache / ("tokens" if tokens else f"colbert-{Path(colbert).name}") / "info.json"
    if not info_path.exists():
        given = "--tokens" if tokens else f"--model {colbert}"
        raise SystemExit(f"no store at {info_path.parent}: run benchmarks.late_interaction --tier {tier.name} {given}")
    colbert_store, _ = multi_view_store(tier, colbert, info_path.parent, encoder_kwargs=encoder_kwargs)
    snippet_store, _ = multi_view_store(tier, minilm, cache / "multi-view")
    counter = TokenBudgetCounter(minilm)
    texts = {d.id: d.content for d in tier.documents}
    by_id = tier.by_id()
    pipeline = hybrid_pipeline(tier, colbert_store, colbert, encoder_kwargs)
    pipeline.warm_up()
    builders, documents = late_rows("token views" if tokens else "ColBERT")
    chunks = chunk_ranker(tier, minilm, chunk_words) if chunk_words else None
    seconds: dict[str, list[float]] = {"token views": [], "snippet views": [], "ColBERT pipeline": []}
    token_build = timed(packed_builder_contexts(colbert_store, counter, budgets, **options), seconds["token views"])
    snippet_build = timed(builder_contexts(snippet_store, counter, budgets), seconds["snippet views"])
    order = sample(len(tier.questions), limit)
    contexts = []
    start = time.perf_counter()
    for n, i in enumerate(order, 1):
        question = tier.questions[i]
        t0 = time.perf_counter()
        out = pipeline.run(
            {"bm25": {"query": question.question}, "embedder": {"text": question.question}},
            include_outputs_from={"embedder", "dense", "joiner"},
        )
        seconds["ColBERT pipeline"].append(time.perf_counter() - t0)
        packed, encoder = out["embedder"]["packed_embedding"], out["embedder"]["encoder"]
        row = question_contexts(
            retrieved["rows"][i], question, texts, by_id, queries[i], snippet_build, counter, budgets
        )
        row = {name: row[name] for name in SNIPPET_ROWS}
        for name, system in builders.items():
            candidates = [  # the upstream's documents with its scores, as a pipeline hands them on
                Document(id=d.id, content=by_id[d.id].content, meta=by_id[d.id].meta, score=d.score)
                for d in out[system]["documents"][:KEEP]
            ]
            row[name] = token_build(candidates, packed, encoder)
        if chunks is not None:
            ranked = chunks(question.question)
            row[f"{chunk_words}-word chunks, title in each"] = {b: fill(ranked, texts, b, counter) for b in budgets}
        for name, system in documents.items():
            spans = [[d.id, 0, len(texts[d.id])] for d in out[system]["documents"][:KEEP]]
            row[name] = {b: fill(spans, texts, b, counter) for b in budgets}
        contexts.append(row)
        if n % 50 == 0 or n == len(order):
            print(f"  {n}/{len(order)} questions ({time.perf_counter() - start:.0f} s)", flush=True)
    return [tier.questions[i] for i in order], contexts, texts, counter, seconds


def alignment(contexts, texts: dict[str, str], budgets: Sequence[int], label: str = "ColBERT") -> dict[str, float]:
    """Per builder row, the % of its pieces (all budgets) that start and end at sentence boundaries."""
    bounds = {}
    for d, text in texts.items():
        spans = sentence_spans(text)
        bounds[d] = ({s for s, _ in spans}, {e for _, e in spans})
    out = {}
    for name in (*late_rows(label)[0], "builder after multi-view", "builder after hybrid"):
        counts = [sentence_aligned(c[name][b], bounds) for c in contexts for b in budgets]
        out[name] = round(100 * sum(a for a, _ in counts) / max(1, sum(n for _, n in counts)), 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", default="pages", choices=("squad-mv", "pages", "pages+20k"))
    parser.add_argument("--model", default="runs/colbert-minilm", help="the ColBERT folder (a MultiVectorEncoder)")
    parser.add_argument("--questions", type=int, default=None, help="a fixed random sample (seed 0); default: all")
    parser.add_argument("--budgets", type=int, nargs="+", default=list(BUDGETS))
    parser.add_argument("--cache-dir", type=Path, default=CACHE)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--upstream-weight", type=float, default=None, help="the token builders' (default: its own)")
    parser.add_argument("--tokens", action="store_true", help="the packaged MiniLM's token views instead of --model")
    parser.add_argument("--chunk-words", type=int, default=0, help="add N-word chunks, title in each")
    args = parser.parse_args()
    import os

    import torch

    from benchmarks.packaged_model import packaged_minilm

    torch.set_num_threads(args.threads)
    tier = load_rag_tier(args.tier)
    start = time.perf_counter()
    options = {} if args.upstream_weight is None else {"upstream_weight": args.upstream_weight}
    minilm = packaged_minilm()
    label = "token views" if args.tokens else "ColBERT"
    questions, contexts, texts, counter, seconds = measure(
        tier,
        args.cache_dir / args.tier,
        minilm if args.tokens else args.model,
        minilm,
        args.budgets,
        args.questions,
        tokens=args.tokens,
        chunk_words=args.chunk_words,
        **options,
    )
    run_seconds = time.perf_counter() - start
    ms = {name: round(1000 * float(np.median(s)), 1) for name, s in seconds.items()}
    command = (
        f"python -m benchmarks.late_interaction_context --tier {args.tier} "
        + ("--tokens" if args.tokens else f"--model {args.model}")
        + (f" --questions {args.questions}" if args.questions else "")
        + (f" --chunk-words {args.chunk_words}" if args.chunk_words else "")
    )
    aligned = alignment(contexts, texts, args.budgets, label)
    load = [round(x, 2) for x in os.getloadavg()]
    payload = {
        "command": command,
        "tier": args.tier,
        "split": "dev",
        "questions": len(questions),
        "budgets": args.budgets,
        "model": f"{minilm} (mode='tokens')" if args.tokens else args.model,
        "machine": machine_label(threads=args.threads),
        "date": utc_now(),
        "load_average": load,
        "run_seconds": round(run_seconds, 1),
        "ms_median": ms,
        "sentence_aligned_pieces_percent": aligned,
        "builder_changes": BUILDER_CHANGES,
        "note": (
            f"`{command}`. Each question's top {KEEP} documents; the builder with its defaults (piece_tokens 64, "
            "upstream_weight 1, order by score, whole document if it fits). "
            + (
                "Token-view rows: the packaged all-MiniLM-L6-v2's zero-shot token views (mode='tokens', exact "
                "MaxSim; hybrid BM25 0.4 / token views 0.6). "
                if args.tokens
                else "ColBERT rows: the ColBERT trained here (exact MaxSim over its token views, packed query; "
                "hybrid BM25 0.4 / ColBERT 0.6). "
            )
            + "Snippet rows: rag_context's (zero-shot all-MiniLM-L6-v2 snippet views, its cached rankings), same "
            "questions."
            + (
                f" Chunk row: DocumentSplitter {args.chunk_words}-word chunks ({args.chunk_words // 5} overlap), the "
                "title embedded in each, ranked by the packaged MiniLM (dense alone), best first, filled to B."
                if args.chunk_words
                else ""
            )
        ),
        "timing": (
            f"Median ms to build one question's contexts from one upstream's {KEEP} documents at all "
            f"{len(args.budgets)} budgets ({len(args.budgets)} builder runs, store search included): "
            f"{ms['token views']} on "
            + ("token views" if label == "token views" else f"{label} token views")
            + f", {ms['snippet views']} on snippet views; the "
            f"{label} hybrid pipeline (BM25, query encoder, MaxSim, fusion) {ms['ColBERT pipeline']}. Load average at "
            f"the end {load}; whole run {run_seconds:.0f} s."
        ),
        "table": summarize(questions, contexts, texts, counter, args.budgets, row_names(label, args.chunk_words)),
    }
    text = markdown(payload) + f"\n{BUILDER_CHANGES}\n"
    text += "\nPieces that start and end at sentence boundaries (all budgets, the builder's splitter):\n\n"
    text += "| builder | % |\n|---|---:|\n" + "".join(f"| {k} | {v} |\n" for k, v in aligned.items())
    stem = f"late_interaction_context.{args.tier}" + (".tokens" if args.tokens else "")
    write_results(RESULTS / stem, payload, markdown=text)
    spans = args.cache_dir / args.tier / f"contexts-dev.{stem}.json"  # for rag_answers --contexts
    spans.write_text(
        json.dumps({"question_ids": [q.id for q in questions], "budgets": args.budgets, "contexts": contexts}) + "\n",
        encoding="utf-8",
    )
    print(f"wrote {spans}")
    print(text)


if __name__ == "__main__":
    main()
