"""Indexing pipeline: a JSONL corpus -> multi-view vectors -> a FAISS multi-view store saved on disk.

    python examples/index_corpus.py --index-dir runs/index                       # squad-mv, packaged MiniLM
    python examples/index_corpus.py --index-dir runs/index --model runs/camvr    # a trained checkpoint
    python examples/index_corpus.py --index-dir runs/index --save-yaml indexing.yaml

The saved store is what `rag_fid.py` (and `FaissMultiViewDocumentStore(index_path=...)` in any pipeline YAML)
loads. `examples/pipelines/indexing.yaml` is this pipeline, dumped with `--save-yaml`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from common import DEFAULT_CORPUS, packaged_minilm, read_corpus
from haystack import Pipeline
from haystack.components.writers import DocumentWriter

from haystack_mvr.components.embedders import MultiViewDocumentEmbedder
from haystack_mvr.document_stores import FaissMultiViewDocumentStore


def indexing_pipeline(model: str, store: FaissMultiViewDocumentStore, batch_size: int = 32) -> Pipeline:
    """Embedder (every view of every document) -> Haystack's own DocumentWriter -> the multi-view store."""
    pipeline = Pipeline()
    pipeline.add_component(
        "embedder", MultiViewDocumentEmbedder(model=model, meta_fields_to_embed=["title"], batch_size=batch_size)
    )
    pipeline.add_component("writer", DocumentWriter(document_store=store))
    pipeline.connect("embedder.documents", "writer.documents")
    return pipeline


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index-dir", type=Path, required=True, help="Where to save the store.")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="JSONL with id, title, text per line.")
    parser.add_argument("--model", default=None, help="Backbone (snippet mode) or checkpoint; default packaged MiniLM.")
    parser.add_argument("--index-factory", default="Flat", help="FAISS index_factory, e.g. HNSW32 or IVF256,PQ32.")
    parser.add_argument("--limit", type=int, default=None, help="Index only the first N documents.")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--save-yaml", type=Path, default=None, help="Also write the pipeline as YAML here.")
    args = parser.parse_args(argv)

    store = FaissMultiViewDocumentStore(index_factory=args.index_factory)
    pipeline = indexing_pipeline(args.model or packaged_minilm(), store, args.batch_size)
    result = pipeline.run({"embedder": {"documents": read_corpus(args.corpus, args.limit)}})
    store.save(args.index_dir)
    print(f"Wrote {result['writer']['documents_written']} documents to {args.index_dir}")
    if args.save_yaml:
        args.save_yaml.write_text(pipeline.dumps(), encoding="utf-8")


if __name__ == "__main__":
    main()
