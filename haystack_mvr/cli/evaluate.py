"""``haystack-mvr eval``: index a corpus and evaluate a question set through the Haystack components."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from haystack_mvr.cli.errors import CommandError


def add_eval_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("eval", help="Evaluate retrieval of a model on a corpus and questions.")
    parser.add_argument(
        "--model",
        required=True,
        help="Multi-view checkpoint dir, a late-interaction (ColBERT) MultiVectorEncoder dir, or a backbone (snippet).",
    )
    parser.add_argument("--corpus", type=Path, required=True, help="Corpus JSONL: id, title, text per line.")
    parser.add_argument("--questions", type=Path, required=True, help="Questions in squad-mv train.jsonl format.")
    parser.add_argument("--dev-split", action="store_true", help="Keep only the squad-mv dev articles' questions.")
    parser.add_argument("--limit", type=_positive, default=None, help="Evaluate only the first N questions.")
    parser.add_argument(
        "--top-k", type=_positive, default=100, help="Documents retrieved per question (metrics @k up to this)."
    )
    parser.add_argument("--label", default=None, help="The system's name in the table (default: the model's name).")
    parser.add_argument("--index-factory", default="Flat", help="FAISS index_factory string.")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--output", type=Path, default=None, help="Write the metrics as JSON here.")
    parser.add_argument(
        "--index-dir",
        type=Path,
        default=None,
        help="Save the encoded corpus here and reuse it on later runs over the same corpus, model and settings "
        "(keyed by the corpus bytes, the model and the contents of its files, the index factory, the sentence "
        "splitter and the haystack-mvr version; any change, or a saved store changed since, encodes again). "
        "Default: encode in memory every run.",
    )
    parser.add_argument(
        "--reader",
        type=Path,
        default=None,
        help="Also score answers (answer_EM, answer_F1; SQuAD / DPR normalisation): a reader folder, e.g. from "
        "haystack-mvr train-reader, reading each question's first --reader-top-k documents.",
    )
    parser.add_argument(
        "--reader-kind",
        choices=("extractive", "fid"),
        default="extractive",
        help="extractive: Haystack's TransformersExtractiveReader; fid: haystack_mvr's FusionInDecoderReader.",
    )
    parser.add_argument("--reader-top-k", type=_positive, default=3, help="Documents the reader reads per question.")
    parser.add_argument(
        "--context",
        choices=("document", "matched_view"),
        default="document",
        help="What the reader reads: whole documents, or each document's matched snippet.",
    )
    parser.add_argument(
        "--diagnostics",
        action="store_true",
        help="Add the multi-view collapse diagnostics: local variation, view perplexity, per-view and answer-view "
        "accuracy, viewer attention KL (on --attention-sample documents). Not for a late-interaction model.",
    )
    parser.add_argument("--attention-sample", type=int, default=256, help="Documents for the viewer attention KL.")
    parser.set_defaults(handler=run_eval)
    return parser


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        msg = f"must be at least 1, got {number}"
        raise argparse.ArgumentTypeError(msg)
    return number


def _depth(metric: str) -> int:
    """The k of a metric named ``...@k`` (0 for others)."""
    _, _, k = metric.rpartition("@")
    return int(k) if k.isdigit() else 0


def model_label(model: str) -> str:
    """A short name for a model path or hub id: the folder's name (with its parent's when that is generic)."""
    path = Path(model)
    if not path.exists():
        return model  # a hub id is already short
    path = path.resolve()
    if path.name in ("model", "final", "checkpoint", "best") and path.parent.name:
        return f"{path.parent.name}/{path.name}"
    return path.name


def check_inputs(args: argparse.Namespace) -> bool:
    """One line per everyday mistake, before any model is loaded or any document encoded: the input files, the
    optional dependencies the metrics need, the model (a missing folder, or a hub id offline and not cached) and
    ``--diagnostics`` for a late-interaction model. Returns whether the model is late-interaction (ColBERT)."""
    import importlib.util

    from haystack_mvr.modeling.loading import is_late_interaction_checkpoint, resolve_model

    for flag, path in (("--corpus", args.corpus), ("--questions", args.questions)):
        if not path.is_file():
            hint = " (the shared data sits beside the clone: ../shared/data/squad-mv/)" if "shared" in str(path) else ""
            msg = f"{flag} {path}: no such file{hint}."
            raise CommandError(msg)
    from haystack_mvr.datasets import load_corpus

    try:
        if not load_corpus(args.corpus, limit=1):  # reads the first record only
            msg = f"--corpus {args.corpus}: holds no documents (one JSON object of id, title, text a line)."
            raise CommandError(msg)
    except ValueError as e:
        raise CommandError(str(e)) from e
    if args.reader is not None and not args.reader.is_dir():
        msg = f"--reader {args.reader}: no such folder (train one with haystack-mvr train-reader)."
        raise CommandError(msg)
    if importlib.util.find_spec("ranx") is None:
        msg = 'haystack-mvr eval needs ranx for its gold-id metrics: pip install "haystack-mvr[eval]"'
        raise CommandError(msg)
    if args.index_dir and args.index_dir.exists() and not args.index_dir.is_dir():
        msg = f"--index-dir {args.index_dir}: exists and is not a folder."
        raise CommandError(msg)
    name, options = resolve_model(args.model)  # ModelNotFoundError naming the model and the packaged weights
    late_interaction = is_late_interaction_checkpoint(name, options)
    if late_interaction and args.diagnostics:
        msg = (
            "--diagnostics measures multi-view collapse (view perplexity, per-view accuracy, viewer attention); "
            f"{args.model} is a late-interaction (ColBERT) model with one view per token: drop --diagnostics."
        )
        raise CommandError(msg)
    return late_interaction


EMBEDDED_META = ["title"]


def run_eval(args: argparse.Namespace) -> int:
    late_interaction = check_inputs(args)  # before the imports below (seconds) and any encoding
    from haystack import Pipeline

    from haystack_mvr.components.embedders import MultiViewTextEmbedder
    from haystack_mvr.components.retrievers import MultiViewRetriever
    from haystack_mvr.datasets import load_questions, split_by_article
    from haystack_mvr.evaluation.pipeline_evaluation import evaluate_ranking, run_query_pipeline
    from haystack_mvr.evaluation.report import markdown_table
    from haystack_mvr.evaluation.retrieval_metrics import DEFAULT_KS

    questions = load_questions(args.questions)
    if args.dev_split:
        questions = split_by_article(questions)[1]
    questions = questions[: args.limit]
    if not questions:
        msg = f"no questions to evaluate in {args.questions}" + (" after --dev-split" if args.dev_split else "")
        raise CommandError(msg)
    store, embedded = _index(args)

    querying = Pipeline()
    querying.add_component("retriever", MultiViewRetriever(document_store=store, top_k=args.top_k))
    if late_interaction:  # every query vector, scored by MaxSim
        querying.add_component("embedder", MultiViewTextEmbedder(model=args.model, embedding_output="packed"))
        querying.connect("embedder.packed_embedding", "retriever.packed_query_embedding")
    else:
        querying.add_component("embedder", MultiViewTextEmbedder(model=args.model))
        querying.connect("embedder.embedding", "retriever.query_embedding")
    querying.connect("embedder.encoder", "retriever.encoder")  # a saved index refuses another query model
    ranked = run_query_pipeline(
        querying, questions, inputs=lambda q: {"embedder": {"text": q}}, output_component="retriever", progress_bar=True
    )
    metrics: dict = evaluate_ranking(ranked, ks=[k for k in DEFAULT_KS if k <= args.top_k] or [args.top_k])
    metrics = {name: value for name, value in metrics.items() if _depth(name) <= args.top_k}  # none deeper than -k
    if args.reader:
        metrics.update(_answer_metrics(args, questions, ranked))
    print(f"{len(questions)} questions, {store.count_documents()} documents, top {args.top_k}")
    print(markdown_table({args.label or model_label(args.model): metrics}))
    if args.diagnostics:
        metrics["diagnostics"] = _diagnostics(args, embedded, querying, questions, ranked)
        print(json.dumps({k: v for k, v in metrics["diagnostics"].items() if k != "viewer_attention_kl"}, indent=2))
    if args.output:
        args.output.write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    return 0


def _answer_metrics(args: argparse.Namespace, questions, ranked) -> dict[str, float]:
    """EM / F1 of ``--reader`` over each question's first ``--reader-top-k`` retrieved documents."""
    from haystack_mvr.evaluation.answer_evaluation import read_answers

    if args.reader_kind == "extractive":
        from haystack_integrations.components.readers.transformers import TransformersExtractiveReader

        reader = TransformersExtractiveReader(model=args.reader, top_k=1, no_answer=False)
    else:
        from haystack_mvr.components.readers import FusionInDecoderReader

        reader = FusionInDecoderReader(model=args.reader, max_passages=args.reader_top_k)
    reader.warm_up()
    run = read_answers(reader, questions, ranked.documents, context=args.context, top_k=args.reader_top_k)
    return run.metrics()


def _index(args: argparse.Namespace):
    """
    The store to evaluate and the embedded documents (``None`` when the store was loaded from ``--index-dir``):
    encoded here, or reused from ``--index-dir`` when it was built from the same corpus, model and settings.
    ``--diagnostics`` reads every document's views, which a loaded store does not hand back: it encodes again.
    """
    import time

    from haystack import Document, Pipeline
    from haystack.components.writers import DocumentWriter

    from haystack_mvr.components.embedders import MultiViewDocumentEmbedder
    from haystack_mvr.datasets import load_corpus
    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
    from haystack_mvr.evaluation.saved_index import index_key, open_saved_index, save_index

    key = None
    if args.index_dir:
        key = index_key(args.corpus, args.model, index_factory=args.index_factory, meta_fields_to_embed=EMBEDDED_META)
        store = None if args.diagnostics else open_saved_index(args.index_dir, key)
        if store is not None:
            print(f"Loaded {store.count_documents()} documents from {args.index_dir} (same corpus, model, settings)")
            return store, None
    documents = [Document(id=p.id, content=p.text, meta={"title": p.title}) for p in load_corpus(args.corpus)]
    store = FaissMultiViewDocumentStore(index_factory=args.index_factory)
    indexing = Pipeline()
    indexing.add_component(
        "embedder",
        MultiViewDocumentEmbedder(model=args.model, meta_fields_to_embed=EMBEDDED_META, batch_size=args.batch_size),
    )
    indexing.add_component("writer", DocumentWriter(document_store=store))
    indexing.connect("embedder.documents", "writer.documents")
    start = time.perf_counter()
    embedded = indexing.run({"embedder": {"documents": documents}}, include_outputs_from={"embedder"})
    print(f"Encoded {store.count_documents()} documents in {time.perf_counter() - start:.0f} s")
    if args.index_dir and key is not None:
        save_index(store, args.index_dir, key)
        print(f"Saved the index to {args.index_dir}; later runs with the same inputs load it")
    return store, embedded["embedder"]["documents"]


def _diagnostics(args: argparse.Namespace, documents, querying, questions, ranked) -> dict:
    import numpy as np

    from haystack_mvr.evaluation.view_report import view_diagnostics_report

    text_embedder = querying.get_component("embedder")
    queries = np.array([text_embedder.run(text=q.question)["embedding"] for q in questions], dtype=np.float32)
    attention = None
    encoder = querying.get_component("embedder").encoder
    if encoder.config.uses_viewer_tokens and args.attention_sample > 0:
        sample = documents[: args.attention_sample]
        texts = [f"{d.meta['title']}\n{d.content}" for d in sample]
        attention = []
        for start in range(0, len(texts), args.batch_size):
            attention.extend(encoder.viewer_attention(texts[start : start + args.batch_size]))
    return view_diagnostics_report(documents, queries, questions, ranked=ranked, attention=attention)
