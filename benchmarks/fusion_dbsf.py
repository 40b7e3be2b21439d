"""Distribution-based score fusion (DBSF) beside the convex hybrid, weights picked on TRAINING questions only.

    python -m benchmarks.fusion_dbsf --threads 1          # squad-mv and pages, ~15 min on a loaded 2-core VM

For each tier (``squad-mv``: 2,067 paragraphs; ``pages``: benchmarks/long_documents.py's 283 pages) one Haystack
``Pipeline`` holds ``InMemoryBM25Retriever`` (title + text, as benchmarks/rag_retrieval.py's hybrid) and
``MultiViewTextEmbedder`` -> ``MultiViewRetriever`` over the cached multi-view store (``runs/rag/<tier>/multi-view``,
encoded by ``python -m benchmarks.rag_retrieval --tier <tier>``), 100 candidates a side, and several joiners fed by
the same two retrievers:

- ``convex``: ``add_fusion_joiner(fusion="convex", weights=[0.4, 0.6])``, the README's hybrid (weights from
  benchmarks/results/hybrid_weights.md);
- ``dbsf <w>``: ``add_fusion_joiner(fusion="dbsf", weights=[w, 1 - w])`` for each BM25 weight ``w`` (mean +- 3 std
  of each list mapped to [0, 1], then a weighted sum, as Qdrant's DBSF);
- ``haystack dbsf``: Haystack's own ``DocumentJoiner(join_mode="distribution_based_rank_fusion")`` (the same
  rescaling, then each document's highest score; no weights).

The DBSF weight is picked on a seeded sample of ``--train-questions`` training questions
(``split_by_article(...)[0]``, never the dev split) by R@1, then R@5; the dev split (1,823 questions) is run with
that weight. Writes benchmarks/results/fusion_dbsf.json and .md.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # before numpy and torch load: they size their thread pools then
    from benchmarks.harness import pin_threads

    pin_threads(default=1)

from haystack import Document, Pipeline

from benchmarks.harness import RESULTS, machine_label, write_results

TIERS = ("squad-mv", "pages")
CANDIDATES = 100
KS = (1, 5, 20)
CONVEX_WEIGHTS = [0.4, 0.6]  # benchmarks/results/hybrid_weights.md
DBSF_WEIGHTS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)  # BM25's; the dense side gets 1 - w


def dbsf_name(w: float) -> str:
    return f"dbsf_{round(w * 100)}"  # component names take no dots


def fusion_pipeline(documents: list[Document], store, model: str, dbsf_weights: tuple[float, ...]) -> Pipeline:
    """BM25 + multi-view, 100 candidates each, fused by every joiner compared (all in one pipeline)."""
    from haystack.components.joiners import DocumentJoiner
    from haystack.components.retrievers import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    from haystack_mvr.components.embedders import MultiViewTextEmbedder
    from haystack_mvr.components.joiners import add_fusion_joiner
    from haystack_mvr.components.retrievers import MultiViewRetriever

    bm25_store = InMemoryDocumentStore()
    bm25_store.write_documents(
        [
            Document(id=d.id, content=f"{d.meta['title']}\n\n{d.content}" if d.meta.get("title") else d.content)
            for d in documents
        ]
    )
    keep = max(KS)
    pipeline = Pipeline()
    pipeline.add_component("bm25", InMemoryBM25Retriever(document_store=bm25_store, top_k=CANDIDATES))
    pipeline.add_component("embedder", MultiViewTextEmbedder(model=model))
    pipeline.add_component("dense", MultiViewRetriever(document_store=store, top_k=CANDIDATES))
    pipeline.connect("embedder.packed_embedding", "dense.packed_query_embedding")
    pipeline.connect("embedder.encoder", "dense.encoder")
    add_fusion_joiner(pipeline, ["bm25", "dense"], fusion="convex", weights=CONVEX_WEIGHTS, top_k=keep, name="convex")
    for w in dbsf_weights:
        add_fusion_joiner(pipeline, ["bm25", "dense"], fusion="dbsf", weights=[w, 1 - w], top_k=keep, name=dbsf_name(w))
    pipeline.add_component("haystack_dbsf", DocumentJoiner(join_mode="distribution_based_rank_fusion", top_k=keep))
    pipeline.connect("bm25.documents", "haystack_dbsf.documents")
    pipeline.connect("dense.documents", "haystack_dbsf.documents")
    return pipeline


def systems(dbsf_weights: tuple[float, ...]) -> dict[str, str]:
    """Row label -> the pipeline component whose documents it ranks by."""
    rows = {"BM25": "bm25", "multi-view": "dense", "convex 0.4 / 0.6": "convex"}
    rows.update({f"DBSF {w:g} / {1 - w:g}": dbsf_name(w) for w in dbsf_weights})
    rows["Haystack DBSF mode (max, unweighted)"] = "haystack_dbsf"
    return rows


def evaluate(pipeline: Pipeline, questions, rows: dict[str, str], label: str) -> dict[str, Any]:
    """R@k of every row over ``questions`` (gold = ``positive_id``), from one pipeline run per question."""
    hits = {row: dict.fromkeys(KS, 0) for row in rows}
    ranks: dict[str, list[int | None]] = {row: [] for row in rows}  # the gold's rank per question (None: past 20)
    outputs = set(rows.values())
    start = time.perf_counter()
    for i, q in enumerate(questions, 1):
        out = pipeline.run(
            {"bm25": {"query": q.question}, "embedder": {"text": q.question}}, include_outputs_from=outputs
        )
        for row, component in rows.items():
            ids = [d.id for d in out[component]["documents"]]
            ranks[row].append(ids.index(q.positive_id) + 1 if q.positive_id in ids else None)
            for k in KS:
                hits[row][k] += q.positive_id in ids[:k]
        if i % 200 == 0 or i == len(questions):
            print(f"  {label}: {i}/{len(questions)} ({time.perf_counter() - start:.0f} s)", flush=True)
    seconds = time.perf_counter() - start
    n = len(questions)
    return {
        "questions": n,
        "seconds": round(seconds, 1),
        "ms_per_question": round(1000 * seconds / n, 1),
        "recall": {row: {f"R@{k}": round(100 * hits[row][k] / n, 1) for k in KS} for row in rows},
        "ranks": ranks,
    }


def sign_test(a: list[int | None], b: list[int | None], k: int) -> dict[str, Any]:
    """Paired R@k of two rows over the same questions: the questions only ``a`` gets right, those only ``b`` gets
    right, and the exact two-sided sign test's p-value over those discordant questions."""
    only_a = sum(1 for x, y in zip(a, b, strict=True) if x is not None and x <= k and (y is None or y > k))
    only_b = sum(1 for x, y in zip(a, b, strict=True) if y is not None and y <= k and (x is None or x > k))
    n = only_a + only_b
    tail = sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1)) / 2**n if n else 1.0
    return {"only_first": only_a, "only_second": only_b, "p_two_sided": round(min(1.0, 2 * tail), 4)}


def pick(train: dict[str, Any], dbsf_weights: tuple[float, ...]) -> float:
    """The DBSF BM25 weight with the best training R@1, then R@5 (then the lower weight)."""

    def key(w: float) -> tuple[float, float, float]:
        r = train["recall"][f"DBSF {w:g} / {1 - w:g}"]
        return (r["R@1"], r["R@5"], -w)

    return max(dbsf_weights, key=key)


def run_tier(name: str, args, model: str) -> dict[str, Any]:
    from benchmarks.rag_retrieval import load_rag_tier, multi_view_store

    folder = args.cache_dir / name / "multi-view"
    if not (folder / "info.json").exists():
        raise SystemExit(f"No cached store in {folder}: run python -m benchmarks.rag_retrieval --tier {name} first.")
    dev_tier = load_rag_tier(name, "dev")
    train_tier = load_rag_tier(name, "train")
    store, info = multi_view_store(dev_tier, model, folder)
    t0 = time.perf_counter()
    store.count_documents()  # open the saved store before timing queries
    print(f"{name}: {info['documents']} documents, store opened in {time.perf_counter() - t0:.1f} s", flush=True)
    train_questions = random.Random(args.seed).sample(
        train_tier.questions, min(args.train_questions, len(train_tier.questions))
    )
    dev_questions = dev_tier.questions[: args.dev_questions] if args.dev_questions else dev_tier.questions

    pipeline = fusion_pipeline(dev_tier.documents, store, model, DBSF_WEIGHTS)
    pipeline.warm_up()
    train = evaluate(pipeline, train_questions, systems(DBSF_WEIGHTS), f"{name} train")
    chosen = pick(train, DBSF_WEIGHTS)
    print(f"{name}: DBSF BM25 weight {chosen:g} chosen on training questions", flush=True)
    dev_pipeline = fusion_pipeline(dev_tier.documents, store, model, (chosen,))
    dev_pipeline.warm_up()
    dev = evaluate(dev_pipeline, dev_questions, systems((chosen,)), f"{name} dev")
    dbsf_row = f"DBSF {chosen:g} / {1 - chosen:g}"
    paired = {f"R@{k}": sign_test(dev["ranks"][dbsf_row], dev["ranks"]["convex 0.4 / 0.6"], k) for k in KS}
    for split in (train, dev):  # the paired counts above keep what the per-question ranks say
        del split["ranks"]
    return {
        "documents": info["documents"],
        "dbsf_bm25_weight": chosen,
        "train": train,
        "dev": dev,
        "dbsf_vs_convex_dev": paired,
    }


def table(recall: dict[str, dict[str, float]]) -> list[str]:
    lines = ["| system | R@1 | R@5 | R@20 |", "|---|---:|---:|---:|"]
    lines += [f"| {row} | {r['R@1']:.1f} | {r['R@5']:.1f} | {r['R@20']:.1f} |" for row, r in recall.items()]
    return lines


def markdown(payload: dict[str, Any]) -> str:
    lines = [
        "# Distribution-based score fusion (DBSF) beside the convex hybrid",
        "",
        "BM25 (`InMemoryBM25Retriever`, title + text) + snippet multi-view (packaged all-MiniLM-L6-v2, zero-shot, "
        "the cached `runs/rag/<tier>/multi-view` store), 100 candidates a side, fused in one Haystack pipeline by "
        '`add_fusion_joiner(fusion="convex", weights=[0.4, 0.6])` (the README\'s hybrid), '
        '`add_fusion_joiner(fusion="dbsf", weights=[w, 1 - w])` (mean +- 3 std -> [0, 1] per list, weighted sum, '
        "as Qdrant's DBSF) and Haystack's own `DocumentJoiner(join_mode=\"distribution_based_rank_fusion\")` (the "
        "same rescaling, then each document's highest score, no weights). The DBSF weight was chosen on "
        f"{payload['train_questions']} seeded training questions (articles outside the dev split; R@1, then R@5), "
        "then the dev split was run once with it. Gold R@k in %: the question's gold paragraph (squad-mv) or the "
        "page that holds it (pages) in the top k.",
        "",
        f"`{payload['command']}`; {payload['machine']}.",
        "",
    ]
    for name, tier in payload["tiers"].items():
        w = tier["dbsf_bm25_weight"]
        lines += [
            f"## {name} ({tier['documents']} documents): dev split, {tier['dev']['questions']} questions",
            "",
            *table(tier["dev"]["recall"]),
            "",
            f"DBSF BM25 weight {w:g} (dense {1 - w:g}), chosen on training questions. "
            f"{tier['dev']['ms_per_question']:.0f} ms per question for the whole pipeline (every joiner included).",
            "",
            "Paired, DBSF against convex on the same dev questions (questions only DBSF / only convex gets right; "
            "exact two-sided sign test over those): "
            + "; ".join(
                f"{k} {p['only_first']} / {p['only_second']}, p = {p['p_two_sided']:.3g}"
                for k, p in tier["dbsf_vs_convex_dev"].items()
            )
            + ".",
            "",
            f"### {name}: training questions ({tier['train']['questions']}), where the DBSF weight was chosen",
            "",
            *table(tier["train"]["recall"]),
            "",
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiers", default=",".join(TIERS), help="comma-separated: squad-mv, pages")
    parser.add_argument("--train-questions", type=int, default=600)
    parser.add_argument("--dev-questions", type=int, default=0, help="0: all 1,823 (fewer for a smoke run)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-dir", type=Path, default=Path("runs/rag"))
    parser.add_argument("--model", default=None, help="the model the cached stores were built with (packaged MiniLM)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    args = parser.parse_args()
    import torch

    from benchmarks.packaged_model import packaged_minilm

    torch.set_num_threads(args.threads)
    model = args.model or packaged_minilm()
    start = time.perf_counter()
    tiers = {name: run_tier(name, args, model) for name in args.tiers.split(",")}
    payload = {
        "command": "python -m benchmarks.fusion_dbsf " + " ".join(sys.argv[1:]),
        "machine": machine_label(threads=args.threads, detail="shared with other jobs"),
        "train_questions": args.train_questions,
        "seed": args.seed,
        "candidates": CANDIDATES,
        "convex_weights": CONVEX_WEIGHTS,
        "dbsf_weights_tried": list(DBSF_WEIGHTS),
        "total_seconds": round(time.perf_counter() - start, 1),
        "tiers": tiers,
    }
    args.output_dir.mkdir(parents=True, exist_ok=True)
    write_results(args.output_dir / "fusion_dbsf", payload, markdown=markdown(payload))
    print(markdown(payload))


if __name__ == "__main__":
    main()
