"""``haystack-mvr eval``: index a corpus and evaluate a question set through the Haystack components."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_eval_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("eval", help="Evaluate retrieval of a model on a corpus and questions.")
    parser.add_argument("--model", required=True, help="Multi-view checkpoint dir, or a backbone (snippet mode).")
    parser.add_argument("--corpus", type=Path, required=True, help="Corpus JSONL: id, title, text per line.")
    parser.add_argument("--questions", type=Path, required=True, help="Questions in squad-mv train.jsonl format.")
    parser.add_argument("--dev-split", action="store_true", help="Keep only the squad-mv dev articles' questions.")
    parser.add_argument("--index-factory", default="Flat", help="FAISS index_factory string.")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--output", type=Path, default=None, help="Write the metrics as JSON here.")
    parser.set_defaults(handler=run_eval)
    return parser


def run_eval(args: argparse.Namespace) -> int:
    from haystack import Document, Pipeline
    from haystack.components.writers import DocumentWriter

    from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder
    from haystack_mvr.components.retrievers import MultiViewRetriever
    from haystack_mvr.datasets import load_corpus, load_questions, split_by_article
    from haystack_mvr.document_stores import FaissMultiViewDocumentStore
    from haystack_mvr.evaluation.pipeline_evaluation import evaluate_ranking, run_query_pipeline
    from haystack_mvr.evaluation.report import markdown_table

    questions = load_questions(args.questions)
    if args.dev_split:
        questions = split_by_article(questions)[1]
    documents = [Document(id=p.id, content=p.text, meta={"title": p.title}) for p in load_corpus(args.corpus)]
    store = FaissMultiViewDocumentStore(index_factory=args.index_factory)
    indexing = Pipeline()
    indexing.add_component(
        "embedder", MultiViewDocumentEmbedder(model=args.model, meta_fields_to_embed=["title"], batch_size=args.batch_size)
    )
    indexing.add_component("writer", DocumentWriter(document_store=store))
    indexing.connect("embedder.documents", "writer.documents")
    indexing.run({"embedder": {"documents": documents}})

    querying = Pipeline()
    querying.add_component("embedder", MultiViewTextEmbedder(model=args.model))
    querying.add_component("retriever", MultiViewRetriever(document_store=store, top_k=100))
    querying.connect("embedder.embedding", "retriever.query_embedding")
    ranked = run_query_pipeline(
        querying, questions, inputs=lambda q: {"embedder": {"text": q}}, output_component="retriever", progress_bar=True
    )
    metrics = evaluate_ranking(ranked)
    print(markdown_table({str(args.model): metrics}))
    if args.output:
        args.output.write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    return 0
