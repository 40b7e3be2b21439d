"""Question answering: multi-view retrieval feeding a Fusion-in-Decoder reader, as one Haystack pipeline.

    python examples/index_corpus.py --index-dir runs/index
    python examples/rag_fid.py --index-dir runs/index --reader google/flan-t5-base
    python examples/rag_fid.py --index-dir runs/index --reader google/flan-t5-base --context matched_view
    python examples/rag_fid.py --from-yaml examples/pipelines/rag_fid.yaml --question "..."
    # offline: point the YAML's hub ids at local folders (any T5-family reader; the packaged MiniLM by default)
    python examples/rag_fid.py --from-yaml examples/pipelines/rag_fid.yaml --reader path/to/flan-t5-base \
        --index-dir runs/index

The retriever returns whole documents ranked by their best view, each with the snippet that matched
(`meta["mvr_matched_text"]`). `--context matched_view` hands the reader only those snippets: far fewer tokens
per passage than whole paragraphs. The reader is any T5-family checkpoint, by hub id or local path.
`examples/pipelines/rag_fid.yaml` is this pipeline, dumped with `--save-yaml`; it names hub ids, which a machine
without a network cannot download: `--model`, `--reader` and `--index-dir` replace them (or edit the YAML).
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from common import DEFAULT_QUESTIONS, packaged_minilm
from haystack import Pipeline

from haystack_mvr.components.embedders import MultiViewTextEmbedder
from haystack_mvr.components.readers import FusionInDecoderReader
from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.document_stores import FaissMultiViewDocumentStore


def rag_pipeline(
    model: str, index_dir: str, reader: str, *, top_k: int = 10, context: str = "document", max_passages: int = 10
) -> Pipeline:
    """Query embedder -> multi-view retriever (documents + matched snippets) -> Fusion-in-Decoder reader."""
    store = FaissMultiViewDocumentStore(index_path=index_dir)
    pipeline = Pipeline()
    pipeline.add_component("query_embedder", MultiViewTextEmbedder(model=model))
    pipeline.add_component("retriever", MultiViewRetriever(document_store=store, top_k=top_k))
    pipeline.add_component("reader", FusionInDecoderReader(model=reader, context=context, max_passages=max_passages))
    pipeline.connect("query_embedder.embedding", "retriever.query_embedding")
    pipeline.connect("retriever.documents", "reader.documents")
    return pipeline


DEFAULT_READER = "google/flan-t5-base"


def load_yaml(path: Path, *, model: str | None, reader: str | None, index_dir: str | None) -> Pipeline:
    """The pipeline in ``path``, with its embedder model, reader model and store path replaced when given."""
    import yaml

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    for component in data.get("components", {}).values():
        params = component.get("init_parameters", {})
        kind = component.get("type", "")
        if model and kind.endswith("MultiViewTextEmbedder"):
            params["model"] = model
        if reader and kind.endswith("FusionInDecoderReader"):
            params["model"] = reader
        store = params.get("document_store", {}).get("init_parameters", {})
        if index_dir and "index_path" in store:
            store["index_path"] = index_dir
        if store.get("index_path") and not Path(store["index_path"]).is_dir():
            raise SystemExit(missing_index(store["index_path"]))
    return Pipeline.from_dict(data)


def missing_index(index_dir: str) -> str:
    return f"No index at {index_dir}: build one first with python examples/index_corpus.py --index-dir {index_dir}"


def ask(pipeline: Pipeline, question: str) -> list:
    result = pipeline.run({"query_embedder": {"text": question}, "reader": {"query": question}})
    return result["reader"]["answers"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index-dir", default=None, help="A store saved by index_corpus.py.")
    parser.add_argument("--model", default=None, help="The model the index was built with (default packaged MiniLM).")
    parser.add_argument("--reader", default=None, help=f"T5-family checkpoint: hub id or path ({DEFAULT_READER}).")
    parser.add_argument("--context", choices=["document", "matched_view"], default="document")
    parser.add_argument("--top-k", type=int, default=10, help="Documents retrieved (and read, up to --max-passages).")
    parser.add_argument("--max-passages", type=int, default=10)
    parser.add_argument("--question", action="append", help="A question to ask (repeatable).")
    parser.add_argument("--from-yaml", type=Path, default=None, help="Load the pipeline from this YAML instead.")
    parser.add_argument("--save-yaml", type=Path, default=None, help="Write the pipeline as YAML here.")
    args = parser.parse_args(argv)

    if args.from_yaml:
        pipeline = load_yaml(args.from_yaml, model=args.model, reader=args.reader, index_dir=args.index_dir)
    else:
        if not args.index_dir:
            parser.error("--index-dir is required unless --from-yaml is given")
        if not Path(args.index_dir).is_dir():
            raise SystemExit(missing_index(args.index_dir))
        pipeline = rag_pipeline(
            args.model or packaged_minilm(),
            args.index_dir,
            args.reader or DEFAULT_READER,
            top_k=args.top_k,
            context=args.context,
            max_passages=args.max_passages,
        )
    if args.save_yaml:
        args.save_yaml.write_text(pipeline.dumps(), encoding="utf-8")

    for question in args.question or DEFAULT_QUESTIONS:
        answers = ask(pipeline, question)
        print(f"\nQ: {question}")
        if not answers:
            print("  no answer: the retriever returned no documents with text (is the index empty?)")
        for answer in answers:
            print(f"  A: {answer.data!r}  (log p = {answer.meta.get('log_probability', float('nan')):.2f})")
            for doc in answer.documents[:3]:
                snippet = doc.meta.get("mvr_matched_text") or doc.content or ""
                print(textwrap.indent(textwrap.fill(f"from {doc.id}: {snippet}", 100), "     "))


if __name__ == "__main__":
    main()
