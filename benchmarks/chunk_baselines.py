"""The strongest plain baseline a Haystack user builds, at a chosen vectors-per-document count (issue 54): Haystack's
``DocumentSplitter`` word chunks, each embedded with sentence-transformers-haystack (with the title in every chunk
or without), a document ranked by its best chunk; and their hybrid with BM25 as the README fuses it.

    python -m benchmarks.chunk_baselines --tier squad-mv --words 25 --overlap 5
    python -m benchmarks.chunk_baselines --tier pages --words 50 --overlap 10

Every dev question runs the chunk pipeline (``SentenceTransformersTextEmbedder`` -> ``InMemoryEmbeddingRetriever``,
the ``--chunk-top-k`` best chunks, then their documents in order of their best chunk) and BM25 (title + text); the
hybrid is ``FusionJoiner`` convex 0.4 / 0.6 over the 100 best documents of each, as ``benchmarks.late_interaction``
runs it for the multi-view systems. Writes ``benchmarks/results/chunk_baselines.<tier>.{json,md}``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

if __name__ == "__main__":
    from benchmarks.harness import pin_threads

    pin_threads(default=2)

import numpy as np

from benchmarks.harness import RESULTS, machine_label, rows_table, utc_now, write_results
from benchmarks.late_interaction import load_tier, metrics
from benchmarks.packaged_model import packaged_minilm
from benchmarks.rag_retrieval import HYBRID_WEIGHTS, TOP_K


def chunk_store(
    documents, model: str, words: int, overlap: int, title: bool, batch_size: int = 64, split_by: str = "word"
):
    """The documents split into ``words``-word chunks (``overlap`` words shared; ``split_by="sentence"``: sentences),
    embedded one vector each; ``split_by="snippet-spans"``: ``documents`` are already the pieces."""
    from haystack import Pipeline
    from haystack.components.preprocessors import DocumentSplitter
    from haystack.components.writers import DocumentWriter
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from haystack_integrations.components.embedders.sentence_transformers import SentenceTransformersDocumentEmbedder

    store = InMemoryDocumentStore(embedding_similarity_function="dot_product")
    indexing = Pipeline()
    indexing.add_component(

        "embedder",
        SentenceTransformersDocumentEmbedder(
            model=model, meta_fields_to_embed=["title"] if title else [], embedding_separator="\n",
            batch_size=batch_size, progress_bar=False,
        ),
    )  # fmt: skip
    indexing.add_component("writer", DocumentWriter(document_store=store))
    indexing.connect("embedder.documents", "writer.documents")
    first = "embedder"
    if split_by != "snippet-spans":  # else the pieces are written as they come
        splitter = DocumentSplitter(split_by=split_by, split_length=words, split_overlap=overlap)
        indexing.add_component("splitter", splitter)
        indexing.connect("splitter.documents", "embedder.documents")
        first = "splitter"
    start = time.perf_counter()
    indexing.run({first: {"documents": documents}})
    return store, time.perf_counter() - start


def snippet_pieces(tier, model: str) -> list:
    """Each snippet view's span of the tier's cached snippet store as a document of its own (``source_id``, title)."""
    from haystack import Document

    from benchmarks.rag_retrieval import CACHE, multi_view_store

    store, _ = multi_view_store(tier, model, CACHE / tier.name / "multi-view")
    pieces = []
    for stored in store.filter_documents():
        for span in stored.meta.get("mvr_view_spans") or []:
            if span is not None:
                meta = {"source_id": stored.id, "title": stored.meta.get("title", "")}
                pieces.append(Document(content=stored.content[span[0] : span[1]], meta=meta))
    return pieces


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", default="squad-mv", choices=("squad-mv", "pages", "pages+20k", "squad-mv+20k"))
    parser.add_argument("--words", type=int, default=25)
    parser.add_argument("--overlap", type=int, default=5)
    parser.add_argument("--chunk-top-k", type=int, default=300)
    parser.add_argument("--questions", type=int, default=None)
    parser.add_argument("--titles", choices=("both", "with", "without"), default="both", help="chunks with the title")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--split-by", choices=("word", "sentence", "snippet-spans"), default="word",
        help="sentence: --words sentences a chunk; snippet-spans: the snippet views' own spans (of the cached "
        "snippet store, runs/rag/<tier>/multi-view), each encoded on its own text (not pooled from a window)",
    )  # fmt: skip
    args = parser.parse_args()
    import torch
    from haystack import Document, Pipeline
    from haystack.components.retrievers import InMemoryBM25Retriever, InMemoryEmbeddingRetriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from haystack_integrations.components.embedders.sentence_transformers import SentenceTransformersTextEmbedder

    from haystack_mvr.components.joiners import FusionJoiner

    torch.set_num_threads(args.threads)
    tier = load_tier(args.tier)
    asked = tier.questions
    if args.questions and args.questions < len(asked):
        import random

        keep = sorted(random.Random(0).sample(range(len(asked)), args.questions))
        asked = [asked[i] for i in keep]
    gold = [q.positive_id for q in asked]
    minilm = packaged_minilm()
    bm25_store = InMemoryDocumentStore()
    bm25_store.write_documents(
        [Document(id=d.id, content=f"{d.meta['title']}\n\n{d.content}" if d.meta.get("title") else d.content)
         for d in tier.documents]
    )  # fmt: skip
    bm25 = InMemoryBM25Retriever(document_store=bm25_store, top_k=TOP_K)
    bm25_ranked = [bm25.run(query=q.question)["documents"] for q in asked]
    rows: list[dict[str, Any]] = [
        {
            "system": "BM25 (InMemoryBM25Retriever, title + text)",
            **metrics([[d.id for d in r] for r in bm25_ranked], gold),
        }
    ]
    joiner = FusionJoiner(sources=["bm25", "dense"], fusion="convex", weights=HYBRID_WEIGHTS, top_k=TOP_K)
    for title in {"both": (True, False), "with": (True,), "without": (False,)}[args.titles]:
        pieces = snippet_pieces(tier, minilm) if args.split_by == "snippet-spans" else tier.documents
        store, seconds = chunk_store(pieces, minilm, args.words, args.overlap, title, split_by=args.split_by)
        per_doc = store.count_documents() / len(tier.documents)
        query = Pipeline()
        query.add_component("embedder", SentenceTransformersTextEmbedder(model=minilm, progress_bar=False))
        query.add_component("retriever", InMemoryEmbeddingRetriever(document_store=store, top_k=args.chunk_top_k))
        query.connect("embedder.embedding", "retriever.query_embedding")
        dense, hybrid, ms = [], [], []
        for q, bm25_docs in zip(asked, bm25_ranked, strict=True):
            start = time.perf_counter()
            chunks = query.run({"embedder": {"text": q.question}})["retriever"]["documents"]
            best: dict[str, float] = {}
            for c in chunks:  # best first: a document's first chunk is its best
                best.setdefault(c.meta["source_id"], float(c.score))
            docs = [Document(id=i, score=s) for i, s in list(best.items())[:TOP_K]]
            ms.append(1000 * (time.perf_counter() - start))
            dense.append([d.id for d in docs])
            hybrid.append([d.id for d in joiner.run(bm25=bm25_docs, dense=docs)["documents"]])
        name = {
            "word": f"DocumentSplitter {args.words}-word chunks ({args.overlap} overlap)",
            "sentence": f"DocumentSplitter {args.words}-sentence chunks ({args.overlap} overlap)",
            "snippet-spans": "the snippet views' spans, each encoded on its own text (no global view)",
        }[args.split_by] + (", title in each" if title else "")
        rows.append(
            {"system": name, **metrics(dense, gold), "vectors_per_document": round(per_doc, 1),
             "float32_bytes_per_document": round(per_doc * 384 * 4, 1), "encode_seconds": round(seconds, 1),
             "query_ms_median": round(float(np.median(ms)), 1)}
        )  # fmt: skip
        rows.append({"system": f"hybrid, convex (BM25 0.4 / dense 0.6): BM25 + {name}", **metrics(hybrid, gold)})
        print(rows[-2], rows[-1], flush=True)
    payload = {
        "command": f"python -m benchmarks.chunk_baselines --tier {args.tier} --words {args.words} --overlap "
        f"{args.overlap} --titles {args.titles} --threads {args.threads}"
        + (f" --split-by {args.split_by}" if args.split_by != "word" else "")
        + (f" --questions {args.questions}" if args.questions else ""),
        "tier": args.tier,
        "documents": len(tier.documents),
        "questions": len(asked),
        "machine": machine_label(threads=args.threads),
        "date": utc_now(),
        "rows": rows,
    }
    lines = [
        f"# Chunk baselines: {args.tier} ({len(tier.documents)} documents, {len(asked)} dev questions)",
        "",
        f"`{payload['command']}`. {payload['machine']}, {payload['date']}. all-MiniLM-L6-v2 (packaged) through "
        "sentence-transformers-haystack; a document ranks by its best chunk. Gold R@k and MRR@10.",
        "",
        *rows_table(rows, "system", ["R@1", "R@5", "R@20", "MRR@10", "vectors_per_document",
                                     "float32_bytes_per_document", "encode_seconds", "query_ms_median"]),
    ]  # fmt: skip
    stem = f"chunk_baselines.{args.tier}" + (f".{args.split_by}" if args.split_by != "word" else "")
    write_results(RESULTS / stem, payload, markdown="\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
