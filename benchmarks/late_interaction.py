"""A ColBERT (sentence-transformers ``MultiVectorEncoder``) in the README's pipelines, next to BM25, the multi-view
snippet model and the hybrids, on a tier's dev questions (issue 49).

    python -m benchmarks.late_interaction --tier squad-mv --model runs/colbert-minilm
    python -m benchmarks.late_interaction --tier pages --model runs/colbert-minilm
    python -m benchmarks.late_interaction --tier squad-mv+20k --model runs/colbert-minilm --no-snippet

Every system is a Haystack pipeline (``benchmarks.rag_retrieval.hybrid_pipeline``: ``InMemoryBM25Retriever`` over
title + text, ``MultiViewTextEmbedder`` -> ``MultiViewRetriever`` wired packed, and their convex fusion, BM25 0.4 /
dense 0.6, 100 candidates a side). The ColBERT drops into the same pipeline as ``model=``: its documents are stored
one view per kept token (title embedded, as for the snippet model; long pages in windows) in a Flat
``FaissMultiViewDocumentStore``, ranked by exact MaxSim. The snippet model's store and the ColBERT's are encoded once
and cached under ``--cache-dir`` (``runs/rag/<tier>/``, shared with ``rag_retrieval.py``).

Reports gold R@1/5/20 and MRR@10 per system, the vector bytes per document (float32 as stored, and at 32 bytes a
token, the ``PQ32`` compression ``late_interaction_scale.py`` measures), encoding seconds and the median ms a
question. ``--index-factory`` also ranks the ColBERT's (or token) views copied, not re-encoded, into a lossy FAISS
index without kept rows (``"PCA128,IVF1024,PQ64"``), with its index bytes a document. Writes
``benchmarks/results/late_interaction.<tier>.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    from benchmarks.harness import pin_threads

    pin_threads(default=2)

import numpy as np

from benchmarks.harness import RESULTS, machine_label, rows_table, utc_now, write_results
from benchmarks.packaged_model import packaged_minilm
from benchmarks.rag_retrieval import CACHE, Tier, hybrid_pipeline, load_rag_tier, multi_view_store

KS = (1, 5, 20)
SNIPPET_NAMES = {
    "own_text": "MiniLM snippet views, each snippet read on its own (zero-shot; snippet_encoding='own_text')",
    "late_chunking": "MiniLM snippet-pooled multi-view (zero-shot; snippet_encoding='late_chunking')",
}
PQ_BYTES_PER_TOKEN = 32


def load_tier(name: str) -> Tier:
    """``squad-mv``, ``pages`` and ``pages+20k`` as ``rag_retrieval`` builds them; ``squad-mv+20k`` as ``quality``."""
    if name != "squad-mv+20k":
        return load_rag_tier(name)
    from benchmarks.quality import load_tier as quality_tier
    from haystack_mvr.datasets import default_data_dir, load_questions, split_by_article

    data_dir = default_data_dir()
    _, dev = split_by_article(load_questions(data_dir / "squad-mv" / "train.jsonl"))
    return Tier(name, quality_tier(name, data_dir), list(dev))


def metrics(rankings: list[list[str]], gold: list[str]) -> dict[str, float]:
    out = {f"R@{k}": 100 * float(np.mean([g in r[:k] for r, g in zip(rankings, gold, strict=True)])) for k in KS}
    reciprocal = [
        next((1 / (i + 1) for i, d in enumerate(r[:10]) if d == g), 0.0) for r, g in zip(rankings, gold, strict=True)
    ]
    out["MRR@10"] = 100 * float(np.mean(reciprocal))
    return {k: round(v, 1) for k, v in out.items()}


def store_bytes(store) -> dict[str, float]:
    stats = store.stats()
    views = stats.views / max(1, stats.documents)
    dim = stats.dimension or 0
    return {
        "views_per_document": round(views, 1),
        "float32_bytes_per_document": round(views * dim * 4, 1),
        "pq32_bytes_per_document": round(views * PQ_BYTES_PER_TOKEN, 1),
    }


def compressed_copy(store, index_factory: str, folder: Path):
    """``store``'s documents and views in a ``index_factory`` store without kept rows (cached), and its index bytes."""
    from benchmarks.long_documents import requantized
    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore

    if not (folder / "CURRENT").exists():
        requantized(store, index_factory).save(folder)
    return FaissMultiViewDocumentStore(index_path=str(folder)), sum(f.stat().st_size for f in folder.rglob("*.faiss"))


def run_systems(
    tier: Tier, store, model: str, questions: int | None, encoder_kwargs: dict[str, Any] | None = None
) -> dict[str, Any]:
    """BM25, the dense model and their hybrid over ``store``, one pipeline run per question."""
    pipeline = hybrid_pipeline(tier, store, model, encoder_kwargs)
    pipeline.warm_up()
    asked = tier.questions
    if questions and questions < len(asked):  # a seeded sample across every dev article
        keep = sorted(random.Random(0).sample(range(len(asked)), questions))
        asked = [asked[i] for i in keep]
    ranked: dict[str, list[list[str]]] = {"bm25": [], "dense": [], "hybrid": []}
    ms = []
    for i, q in enumerate(asked, 1):
        start = time.perf_counter()
        out = pipeline.run(
            {"bm25": {"query": q.question}, "embedder": {"text": q.question}},
            include_outputs_from={"bm25", "dense", "joiner"},
        )
        ms.append(1000 * (time.perf_counter() - start))
        ranked["bm25"].append([d.id for d in out["bm25"]["documents"][:20]])
        ranked["dense"].append([d.id for d in out["dense"]["documents"][:20]])
        ranked["hybrid"].append([d.id for d in out["joiner"]["documents"][:20]])
        if i % 300 == 0:
            print(f"  {i}/{len(asked)}", flush=True)
    gold = [q.positive_id for q in asked]
    return {name: metrics(r, gold) for name, r in ranked.items()} | {"ms_median": round(float(np.median(ms)), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", default="squad-mv", choices=("squad-mv", "pages", "pages+20k", "squad-mv+20k"))
    parser.add_argument("--model", default=None, help="the ColBERT folder (a MultiVectorEncoder)")
    parser.add_argument(
        "--tokens", action="store_true", help="the packaged MiniLM's zero-shot token views (mode='tokens'), not --model"
    )
    parser.add_argument("--token-options", default="{}", help="JSON encoder_kwargs added to mode='tokens'")
    parser.add_argument("--name", default="ColBERT from all-MiniLM-L6-v2")
    parser.add_argument("--cache-dir", type=Path, default=CACHE)
    parser.add_argument("--questions", type=int, default=None, help="a seeded sample of N dev questions (default: all)")
    parser.add_argument("--no-snippet", action="store_true", help="skip the snippet model's rows")
    parser.add_argument(
        "--snippet-encoding", choices=("own_text", "late_chunking", "both"), default="own_text",
        help="the snippet model's views: each snippet read on its own (the default) or pooled from the whole text",
    )  # fmt: skip
    parser.add_argument("--index-factory", default=None, help="also the ColBERT's views in this lossy FAISS index")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output-name", default=None)
    args = parser.parse_args()
    tier = load_tier(args.tier)
    cache = args.cache_dir / args.tier
    rows: list[dict[str, Any]] = []
    minilm = packaged_minilm()
    if (args.tokens and args.model) or (args.no_snippet and not (args.tokens or args.model)):
        parser.error("give at most one of --model (a ColBERT folder) and --tokens, and one of them with --no-snippet")
    systems = []
    if args.tokens:
        options = {"mode": "tokens", **json.loads(args.token_options)}
        suffix = "-".join(f"{k}={v}" for k, v in sorted(options.items()) if k != "mode")
        systems = [("ColBERT", minilm, cache / f"tokens{'-' + suffix if suffix else ''}", options)]
    elif args.model:
        systems = [("ColBERT", args.model, cache / f"colbert-{Path(args.model).name}", None)]
    if not args.no_snippet:
        encodings = ("own_text", "late_chunking") if args.snippet_encoding == "both" else (args.snippet_encoding,)
        systems[:0] = [
            (SNIPPET_NAMES[e], minilm, cache / ("multi-view" if e == "own_text" else f"multi-view-{e}"),
             {"snippet_encoding": e})
            for e in encodings
        ]  # fmt: skip
    for label, model, folder, encoder_kwargs in systems:
        start = time.perf_counter()
        store, info = multi_view_store(tier, model, folder, encoder_kwargs=encoder_kwargs)
        print(f"{label}: store ready in {time.perf_counter() - start:.0f} s ({info.get('encode_seconds')} s encoding)")
        results = run_systems(tier, store, model, args.questions, encoder_kwargs)
        size = store_bytes(store)
        name = args.name if label == "ColBERT" else label
        if not any(r["system"].startswith("BM25") for r in rows):
            rows.append({"system": "BM25 (InMemoryBM25Retriever, title + text)", **results["bm25"]})
        rows.append(
            {"system": name, **results["dense"], **size, "encode_seconds": info.get("encode_seconds"),
             "pipeline_ms_median": results["ms_median"]}
        )  # fmt: skip
        rows.append({"system": f"hybrid, convex (BM25 0.4 / dense 0.6): BM25 + {name}", **results["hybrid"]})
        if label == "ColBERT" and args.index_factory:
            slug = args.index_factory.replace(",", "-")
            lossy, index_bytes = compressed_copy(store, args.index_factory, folder.parent / f"{folder.name}-{slug}")
            results = run_systems(tier, lossy, model, args.questions, encoder_kwargs)
            lossy_name = f"{name}, {args.index_factory} without kept rows"
            rows.append(
                {"system": lossy_name, **results["dense"], **size, "pipeline_ms_median": results["ms_median"],
                 "index_bytes_per_document": round(index_bytes / max(1, lossy.count_documents()), 1)}
            )  # fmt: skip
            rows.append({"system": f"hybrid, convex (BM25 0.4 / dense 0.6): BM25 + {lossy_name}", **results["hybrid"]})
    payload = {
        "command": "python -m benchmarks.late_interaction " + " ".join(
            f"--{k.replace('_', '-')}" + ("" if v is True else f" {shlex.quote(str(v))}")
            for k, v in vars(args).items() if v not in (None, False) and not (k == "token_options" and v == "{}")
            and not (k == "snippet_encoding" and args.no_snippet)
        ),
        "tier": args.tier,
        "documents": len(tier.documents),
        "questions": min(args.questions or len(tier.questions), len(tier.questions)),
        "machine": machine_label(threads=args.threads),
        "date": utc_now(),
        "model": args.model or f"{minilm} (mode='tokens', {args.token_options})",
        "rows": rows,
    }  # fmt: skip
    columns = ["R@1", "R@5", "R@20", "MRR@10", "views_per_document", "float32_bytes_per_document",
               "pq32_bytes_per_document", "index_bytes_per_document", "encode_seconds",
               "pipeline_ms_median"]  # fmt: skip
    lines = [
        f"# Late interaction: {args.tier} ({payload['documents']} documents, {payload['questions']} dev questions)",
        "",
        f"`{payload['command']}`. {payload['machine']}, {payload['date']}. Gold R@k and MRR@10; bytes per document "
        "of the dense vectors (float32 as stored; at 32 bytes a token for PQ32); ms: the whole hybrid pipeline a "
        "question (BM25, query encoder, dense search, fusion).",
        "",
        *rows_table(rows, "system", columns),
    ]
    stem = RESULTS / f"late_interaction.{args.output_name or args.tier}"
    write_results(stem, payload, markdown="\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
