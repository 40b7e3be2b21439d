"""Train a multi-view encoder on your data, then plug the checkpoint straight into a Haystack pipeline.

    python examples/train_and_plug.py --output-dir runs/demo                  # a short snippet-mode run on squad-mv
    python examples/train_and_plug.py --output-dir runs/demo --mode camvr     # CAMVR: a viewer token per snippet
    python examples/train_and_plug.py --output-dir runs/demo --mode mvr --viewer-position 1 --max-steps 900

`--mode snippet` (the default) is the README's recipe, the one that wins on MiniLM: the backbone's own mean pooling
and cosine scoring (`--normalize`) at a fixed temperature 0.05, titles embedded; `mvr` and `camvr` train the papers'
viewer tokens with inner products and the annealed temperature. The defaults are a few minutes on a CPU, enough to
see the plumbing work, not to learn much: for a real model train longer, or on a GPU
(`benchmarks/fine_tune_squad_mv.sh` gives the recipe and its measured results). The checkpoint directory is all
the components need: `MultiViewDocumentEmbedder(model=dir)`, `MultiViewTextEmbedder(model=dir)`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from common import DEFAULT_DATA, check_model, packaged_minilm, read_corpus

# mode -> (normalize, temperature): the README's snippet recipe; MVR/CAMVR as in the papers (None: annealed)
RECIPES = {"snippet": (True, 0.05), "mvr": (False, None), "camvr": (False, None)}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA / "squad-mv", help="squad-mv format folder.")
    parser.add_argument("--model", default=None, help="Backbone to start from (default: packaged MiniLM).")
    parser.add_argument("--mode", choices=list(RECIPES), default="snippet")
    parser.add_argument("--num-views", type=int, default=None, help="Snippets (snippet, camvr) or viewers (mvr).")
    parser.add_argument("--viewer-position", type=int, default=None, help="mvr only (see MultiViewConfig).")
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-examples", type=int, default=None, help="Train on the first N questions only.")
    parser.add_argument("--index-limit", type=int, default=200, help="Documents to index for the demo query.")
    parser.add_argument(  # the first 200 paragraphs are Super Bowl 50, Warsaw, Normans and Nikola Tesla
        "--question", default="Which NFL team represented the AFC at Super Bowl 50?", help="Ask the demo index this."
    )
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    model = check_model(args.model or packaged_minilm())
    if not (args.data_dir / "train.jsonl").is_file():
        raise SystemExit(f"No squad-mv data in {args.data_dir} (train.jsonl, corpus.jsonl): pass --data-dir.")
    normalize, temperature = RECIPES[args.mode]

    from haystack import Pipeline

    from haystack_mvr.components.embedders import MultiViewTextEmbedder
    from haystack_mvr.components.retrievers import MultiViewRetriever
    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
    from haystack_mvr.training import TrainingArguments, train

    checkpoint = train(
        TrainingArguments(
            model=model,
            mode=args.mode,
            num_views=args.num_views or (8 if args.mode == "snippet" else 4),
            viewer_position=args.viewer_position,
            normalize=normalize,
            temperature=temperature,
            embed_title=True,
            data_dir=str(args.data_dir),
            output_dir=str(args.output_dir),
            max_steps=args.max_steps,
            batch_size=args.batch_size,
            max_examples=args.max_examples,
            num_bm25_negatives=10,
            progress_bar=False,
        )
    )
    print(f"Trained checkpoint: {checkpoint}")

    from index_corpus import indexing_pipeline

    store = FaissMultiViewDocumentStore()
    documents = read_corpus(args.data_dir / "corpus.jsonl", args.index_limit)
    indexing_pipeline(str(checkpoint), store).run({"embedder": {"documents": documents}})
    querying = Pipeline()
    querying.add_component("query_embedder", MultiViewTextEmbedder(model=str(checkpoint), embedding_output="list"))
    querying.add_component("retriever", MultiViewRetriever(document_store=store, top_k=3))
    querying.connect("query_embedder.embedding", "retriever.query_embedding")
    querying.connect("query_embedder.encoder", "retriever.encoder")
    result = querying.run({"query_embedder": {"text": args.question}})
    print(f"\nQ: {args.question}")
    documents = result["retriever"]["documents"]
    if not documents:
        print("  no documents returned: is the index empty?")
    for rank, doc in enumerate(documents, start=1):
        print(f"  {rank}. [{doc.score:.3f}] {doc.id}  matched view {doc.meta.get('mvr_matched_view')}")
        if doc.meta.get("mvr_matched_text"):
            print(f"       {doc.meta['mvr_matched_text'][:160]}")


if __name__ == "__main__":
    main()
