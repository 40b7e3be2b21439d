"""Hybrid retrieval: BM25 and multi-view dense results fused by haystack-mvr's FusionJoiner, then a reader.

    python examples/hybrid_rag.py                                             # retrieval only, squad-mv
    python examples/hybrid_rag.py --reader google/flan-t5-base                # + Fusion-in-Decoder answers
    python examples/hybrid_rag.py --reader deepset/roberta-base-squad2 --reader-kind extractive
        # + transformers-haystack's extractive reader (pip install "haystack-mvr[readers]")

Two fusions (``add_fusion_joiner``, one joiner input per retriever): ``--fusion convex`` (default) min-max normalises
each retriever's scores and sums them with weights ``--bm25-weight`` / 1 - that; ``--fusion rrf`` is reciprocal rank
fusion. The default weight 0.4 was picked on squad-mv training questions
(benchmarks/results/hybrid_weights.md); dev-split results are in benchmarks/results/squad-mv.md. Both retrievers
read the same documents: BM25 from Haystack's InMemoryDocumentStore, the dense side from the FAISS multi-view store.
Each retriever offers ``--candidates`` documents (100) to the fusion, which keeps ``--top-k`` (5): with as few
candidates as documents kept, the hybrid scores below BM25 alone (benchmarks/results/hybrid_readme.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from common import DEFAULT_CORPUS, DEFAULT_QUESTIONS, check_model, packaged_minilm, read_corpus

if TYPE_CHECKING:
    from haystack import Document, Pipeline
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore

EXTRACTIVE_EXTRA = 'pip install "haystack-mvr[readers]"'


def extractive_reader_installed() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("haystack_integrations.components.readers.transformers") is not None
    except ModuleNotFoundError:  # no haystack_integrations at all
        return False


def check_reader(reader: str | None, kind: str) -> None:
    """Before anything is indexed: the extractive reader's package is installed and the reader's weights can load
    here (offline, a hub id that is not cached is one line naming it)."""
    if not reader:
        return
    if kind == "extractive" and not extractive_reader_installed():
        msg = f"--reader-kind extractive needs transformers-haystack's TransformersExtractiveReader: {EXTRACTIVE_EXTRA}"
        raise SystemExit(msg)
    check_model(reader, reader=True)


def build_stores(documents: list[Document], model: str) -> tuple[InMemoryDocumentStore, FaissMultiViewDocumentStore]:
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from index_corpus import indexing_pipeline

    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore

    bm25_store = InMemoryDocumentStore()
    bm25_store.write_documents(documents)
    dense_store = FaissMultiViewDocumentStore()
    indexing_pipeline(model, dense_store).run({"embedder": {"documents": documents}})
    return bm25_store, dense_store


def hybrid_pipeline(
    bm25_store: InMemoryDocumentStore,
    dense_store: FaissMultiViewDocumentStore,
    model: str,
    *,
    top_k: int = 10,
    candidates: int = 100,
    reader: str | None = None,
    reader_kind: str = "fid",
    fusion: str = "convex",
    bm25_weight: float = 0.4,
) -> Pipeline:
    """BM25 + (query embedder -> multi-view retriever) -> FusionJoiner -> optional reader.

    Each retriever offers ``candidates`` documents; the joiner keeps the ``top_k`` best fused ones."""
    from haystack import Pipeline
    from haystack.components.retrievers import InMemoryBM25Retriever

    from haystack_mvr.components.embedders import MultiViewTextEmbedder
    from haystack_mvr.components.joiners import add_fusion_joiner
    from haystack_mvr.components.readers import FusionInDecoderReader
    from haystack_mvr.components.retrievers import MultiViewRetriever

    pipeline = Pipeline()
    pipeline.add_component("bm25", InMemoryBM25Retriever(document_store=bm25_store, top_k=candidates))
    pipeline.add_component("query_embedder", MultiViewTextEmbedder(model=model, embedding_output="packed"))
    pipeline.add_component("dense", MultiViewRetriever(document_store=dense_store, top_k=candidates))
    pipeline.connect("query_embedder.packed_embedding", "dense.packed_query_embedding")
    pipeline.connect("query_embedder.encoder", "dense.encoder")  # refuses a model the dense index was not built with
    add_fusion_joiner(pipeline, ["bm25", "dense"], fusion=fusion, weights=[bm25_weight, 1.0 - bm25_weight], top_k=top_k)
    if reader:
        if reader_kind == "extractive":
            from haystack_integrations.components.readers.transformers import TransformersExtractiveReader

            pipeline.add_component("reader", TransformersExtractiveReader(model=reader, top_k=3))
        else:
            pipeline.add_component("reader", FusionInDecoderReader(model=reader, max_passages=top_k))
        pipeline.connect("joiner.documents", "reader.documents")
    return pipeline


def run(pipeline: Pipeline, question: str) -> dict:
    data = {"bm25": {"query": question}, "query_embedder": {"text": question}}
    if "reader" in pipeline.graph.nodes:
        data["reader"] = {"query": question}
    return pipeline.run(data, include_outputs_from={"bm25", "dense", "joiner"})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--model", default=None, help="Dense model (default: packaged MiniLM, snippet mode).")
    parser.add_argument("--reader", default=None, help="Reader checkpoint (hub id or path); none: retrieval only.")
    parser.add_argument("--reader-kind", choices=["fid", "extractive"], default="fid")
    parser.add_argument("--fusion", choices=["convex", "rrf"], default="convex")
    parser.add_argument("--bm25-weight", type=float, default=0.4, help="BM25's share of the fused score.")
    parser.add_argument("--top-k", type=int, default=5, help="Fused documents kept (what the reader reads).")
    parser.add_argument("--candidates", type=int, default=100, help="Documents each retriever offers the fusion.")
    parser.add_argument("--limit", type=int, default=None, help="Index only the first N documents.")
    parser.add_argument("--question", action="append")
    args = parser.parse_args(argv)

    model = check_model(args.model or packaged_minilm())
    check_reader(args.reader, args.reader_kind)
    bm25_store, dense_store = build_stores(read_corpus(args.corpus, args.limit), model)
    pipeline = hybrid_pipeline(
        bm25_store,
        dense_store,
        model,
        top_k=args.top_k,
        candidates=args.candidates,
        reader=args.reader,
        reader_kind=args.reader_kind,
        fusion=args.fusion,
        bm25_weight=args.bm25_weight,
    )
    for question in args.question or DEFAULT_QUESTIONS:
        result = run(pipeline, question)
        print(f"\nQ: {question}")
        for answer in result.get("reader", {}).get("answers", [])[:3]:
            print(f"  A: {answer.data!r} (score {answer.score if hasattr(answer, 'score') else '-'})")
        for rank, doc in enumerate(result["joiner"]["documents"], start=1):
            print(f"  {rank}. [{doc.score:.4f}] {doc.meta.get('title', '')} ({doc.id})")


if __name__ == "__main__":
    main()
