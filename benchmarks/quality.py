"""Retrieval quality of every system on a benchmark tier, through real Haystack pipelines.

    python -m benchmarks.quality --tier squad-mv
    python -m benchmarks.quality --tier squad-mv+20k --checkpoint mvr=runs/mvr --checkpoint camvr=runs/camvr
    # dense systems on a GPU machine, then BM25 and the hybrid on a CPU one, merged into one results file:
    python -m benchmarks.quality --tier squad-mv+20k --systems single-vector,snippet,checkpoints --checkpoint ...
    python -m benchmarks.quality --tier squad-mv+20k --systems bm25,hybrid --checkpoint mvr=runs/mvr --update
    # scale: 202,067 documents, the encoding saved every 1,024 documents and resumed after a stop
    python -m benchmarks.quality --tier squad-mv+200k --store-dir runs/stores --index-factories OPQ48,PQ48

Writes benchmarks/results/<tier>.json and <tier>.md (the command in both). Needs the benchmark extra:
pip install "haystack-mvr[benchmarks]". Questions: the dev split by article of squad-mv
(haystack_mvr.datasets.DEV_ARTICLES), or any file in its train.jsonl format (--questions); --limit-questions N
for a smoke run.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from haystack import Document, Pipeline
from haystack.components.retrievers import InMemoryBM25Retriever, InMemoryEmbeddingRetriever
from haystack.components.writers import DocumentWriter
from haystack.document_stores.in_memory import InMemoryDocumentStore

from benchmarks.harness import RESULTS, command_line, utc_now, write_results
from benchmarks.harness import torch_machine_label as machine_label  # the name the quality scripts import
from benchmarks.packaged_model import packaged_minilm
from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder
from haystack_mvr.components.joiners import add_fusion_joiner
from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.datasets import default_data_dir, load_corpus, load_questions, split_by_article
from haystack_mvr.document_stores import versioned_folder
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore, persistence
from haystack_mvr.evaluation.pipeline_evaluation import evaluate_ranking, run_query_pipeline
from haystack_mvr.evaluation.report import markdown_table
from haystack_mvr.views import VIEWS_KEY, document_views

SYSTEMS = ("bm25", "single-vector", "snippet", "checkpoints", "hybrid")
TIERS = {"squad-mv": 0, "squad-mv+20k": 20_000, "squad-mv+200k": 200_000}
TOP_K = 100
COLUMNS = ["gold_R@1", "gold_R@5", "gold_R@20", "gold_R@100", "answer_R@5", "answer_R@20", "MRR@10", "nDCG@10"]


def load_tier(tier: str, data_dir: Path) -> list[Document]:
    passages = load_corpus(data_dir / "squad-mv" / "corpus.jsonl")
    docs = [Document(id=p.id, content=p.text, meta={"title": p.title}) for p in passages]
    n = TIERS[tier]
    if n:
        with gzip.open(data_dir / "wiki-distractors" / "passages-200k.jsonl.gz", "rt", encoding="utf-8") as f:
            for line in itertools.islice(f, n):
                r = json.loads(line)
                docs.append(Document(id=f"wiki:{r['id']}", content=r["text"], meta={"title": r.get("title", "")}))
    return docs


def index(pipeline: Pipeline, first: str, docs: list[Document]) -> float:
    start = time.perf_counter()
    pipeline.run({first: {"documents": docs}})
    return time.perf_counter() - start


def bm25_system(docs: list[Document]):
    store = InMemoryDocumentStore()
    # BM25 sees title + text, as in the data README's reference figures.
    store.write_documents([Document(id=d.id, content=f"{d.meta['title']}\n\n{d.content}", meta=d.meta) for d in docs])
    query = Pipeline()
    query.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=TOP_K))
    return query, (lambda q: {"retriever": {"query": q}}), 0.0


def st_single_vector_pipelines(model: str, batch_size: int, top_k: int) -> tuple[Pipeline, Pipeline]:
    """
    The single-vector baseline as users build it (sentence-transformers-haystack, title embedded, one vector per
    document, exact dot product in Haystack's in-memory store): ``(indexing, query)`` over one store.
    """
    from haystack_integrations.components.embedders.sentence_transformers import (
        SentenceTransformersDocumentEmbedder,
        SentenceTransformersTextEmbedder,
    )

    store = InMemoryDocumentStore(embedding_similarity_function="dot_product")
    indexing = Pipeline()
    indexing.add_component(
        "embedder",
        SentenceTransformersDocumentEmbedder(model=model, meta_fields_to_embed=["title"], batch_size=batch_size),
    )
    indexing.add_component("writer", DocumentWriter(document_store=store))
    indexing.connect("embedder.documents", "writer.documents")
    query = Pipeline()
    query.add_component("embedder", SentenceTransformersTextEmbedder(model=model, progress_bar=False))
    query.add_component("retriever", InMemoryEmbeddingRetriever(document_store=store, top_k=top_k))
    query.connect("embedder.embedding", "retriever.query_embedding")
    return indexing, query


def st_single_vector_system(docs: list[Document], model: str, batch_size: int):
    indexing, query = st_single_vector_pipelines(model, batch_size, TOP_K)
    seconds = index(indexing, "embedder", docs)
    return query, (lambda q: {"embedder": {"text": q}}), seconds


def multi_view_store(
    docs: list[Document], model: str, batch_size: int, saved: Path | None = None, chunk: int = 1024
) -> tuple[FaissMultiViewDocumentStore, float, list[np.ndarray]]:
    """
    Encode ``docs`` into a Flat store, or load the copy saved at ``saved`` by an earlier run (and save there).

    With ``saved``, the encoding is resumable: every ``chunk`` documents the store, the views so far and a
    ``progress.json`` (written last, naming the documents done) are saved, and a later run with the same model and
    documents goes on from the last saved chunk. ``index_seconds.json`` marks a complete copy.

    :returns: The store, the indexing seconds (summed over the runs) and each document's views (in ``docs``
        order), which ``compressed_stores`` writes into other indexes.
    """
    store = FaissMultiViewDocumentStore(index_factory="Flat")
    timing = saved / "index_seconds.json" if saved else None
    views_file = saved / "views.npz" if saved else None
    progress = saved / "progress.json" if saved else None
    if saved and timing.exists() and views_file.exists() and persistence.exists(saved):
        store.load(saved)
        if store.count_documents() == len(docs):
            print(f"loaded the encoded corpus from {saved}")
            return store, json.loads(timing.read_text(encoding="utf-8"))["index_seconds"], read_views(views_file)
        store = FaissMultiViewDocumentStore(index_factory="Flat")
    done, seconds, views = 0, 0.0, []
    if saved and progress.exists() and views_file.exists() and persistence.exists(saved):
        state = json.loads(progress.read_text(encoding="utf-8"))
        if state["model"] == model and state["ids"] == [d.id for d in docs[: len(state["ids"])]]:
            done, seconds = len(state["ids"]), state["index_seconds"]
            store.load(saved)
            # A stop between saving the store and writing progress.json leaves one chunk too many: drop it.
            extra = [d.id for d in docs[done : done + chunk]]
            store.delete_documents(extra)
            views = read_views(views_file)[:done]
            if store.count_documents() != done or len(views) != done:
                found = f"{store.count_documents()} documents and {len(views)} views"
                raise SystemExit(f"{saved} holds {found}, not {done}; delete it.")
            print(f"resuming the encoding saved in {saved}: {done} of {len(docs)} documents done")
    if saved:
        saved.mkdir(parents=True, exist_ok=True)
    indexing = Pipeline()
    indexing.add_component(
        "embedder", MultiViewDocumentEmbedder(model=model, meta_fields_to_embed=["title"], batch_size=batch_size)
    )
    indexing.add_component("writer", DocumentWriter(document_store=store))
    indexing.connect("embedder.documents", "writer.documents")
    step = chunk if saved else max(len(docs), 1)  # without a save, one pass
    for lo in range(done, len(docs), step):
        part = docs[lo : lo + step]
        start = time.perf_counter()
        embedded = indexing.run({"embedder": {"documents": part}}, include_outputs_from={"embedder"})["embedder"]
        seconds += time.perf_counter() - start
        views += [document_views(d) for d in embedded["documents"]]
        del embedded
        if saved:
            write_views(views_file, views)
            store.save(saved)
            state = {"model": model, "index_seconds": seconds, "ids": [d.id for d in docs[: lo + len(part)]]}
            write_atomically(progress, json.dumps(state))
            print(f"saved {lo + len(part)} of {len(docs)} encoded documents in {saved} ({seconds:.0f} s)", flush=True)
    if saved:
        timing.write_text(json.dumps({"index_seconds": seconds, "model": model}) + "\n", encoding="utf-8")
    return store, seconds, views


def read_views(path: Path) -> list[np.ndarray]:
    with np.load(path) as z:
        return np.split(z["views"], np.cumsum(z["counts"])[:-1])


def write_views(path: Path, views: list[np.ndarray]) -> None:
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, views=np.concatenate(views), counts=[len(v) for v in views])
    os.replace(tmp, path)


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def compressed_stores(docs: list[Document], views: list[np.ndarray], spec: str, scratch: Path):
    """
    The same documents and views under a compressed FAISS index, as a user builds one: the views written into a
    store with that ``index_factory`` and ``keep_vectors=False`` (no float32 rows kept: the recall cost of the
    compression is measured, not hidden by an exact re-ranking), trained once and saved, then that copy loaded
    again with each search setting.

    :param spec: ``FACTORY`` or ``FACTORY@PARAM=V1,V2`` (``OPQ64,IVF1024,PQ64@nprobe=32,128``).
    :returns: Yields ``(label, store, info)`` per setting; ``info`` has the build time and index bytes per view.
    """
    factory, _, param = spec.partition("@")
    name, _, values = param.partition("=")
    settings = [{name: int(v)} for v in values.split(",")] if param else [None]
    # Trained on 65,536 rows (FAISS's own PQ sample limit: 256 per centroid), or every row when fewer.
    rows = sum(len(v) for v in views)
    train_size = min(rows, 1 << 16)
    trained = FaissMultiViewDocumentStore(
        index_factory=factory, search_parameters=settings[0], keep_vectors=False, train_size=train_size
    )
    start = time.perf_counter()
    for lo in range(0, len(docs), 10_000):
        trained.write_documents(
            [
                Document(id=d.id, content=d.content, meta={**d.meta, VIEWS_KEY: v})
                for d, v in zip(docs[lo : lo + 10_000], views[lo : lo + 10_000], strict=True)
            ]
        )
    trained.search([0.0] * trained.embedding_dim, top_k=1)  # trains and fills the index if writes did not
    build_seconds = time.perf_counter() - start
    trained.save(scratch / "trained")
    version = (scratch / "trained" / versioned_folder.POINTER).read_text(encoding="utf-8").strip()
    index_file = scratch / "trained" / version / "index.faiss"
    if not index_file.exists():
        msg = f"{factory} was not trained on {rows} rows (its train_size is larger); use a smaller index."
        raise RuntimeError(msg)
    info = {
        "index_build_seconds": round(build_seconds, 1),
        "index_bytes_per_view": round(index_file.stat().st_size / rows, 1),
    }
    del trained
    for setting in settings:
        store = FaissMultiViewDocumentStore(index_factory=factory, search_parameters=setting, keep_vectors=False)
        store.load(scratch / "trained")  # the trained index is read back, not rebuilt
        label = factory + "".join(f", {k}={v}" for k, v in (setting or {}).items())
        yield label, store, info


def multi_view_system(store: FaissMultiViewDocumentStore, model: str):
    query = Pipeline()
    query.add_component("embedder", MultiViewTextEmbedder(model=model))
    query.add_component("retriever", MultiViewRetriever(document_store=store, top_k=TOP_K))
    query.connect("embedder.embedding", "retriever.query_embedding")
    return query, (lambda q: {"embedder": {"text": q}})


def hybrid_system(
    bm25_query: Pipeline,
    store: FaissMultiViewDocumentStore,
    model: str,
    weights: list[float] | None = None,
    fusion: str = "rrf",
):
    """
    BM25 and multi-view retrieval fused by Haystack's DocumentJoiner (``weights`` = [BM25, dense]).

    ``fusion``: ``"rrf"`` (reciprocal rank fusion) or ``"convex"`` (min-max normalised scores summed with the
    weights), as wired by ``add_fusion_joiner``.
    """
    bm25_store = bm25_query.get_component("retriever").document_store
    query = Pipeline()
    query.add_component("bm25", InMemoryBM25Retriever(document_store=bm25_store, top_k=TOP_K))
    query.add_component("embedder", MultiViewTextEmbedder(model=model))
    query.add_component("dense", MultiViewRetriever(document_store=store, top_k=TOP_K))
    add_fusion_joiner(query, ["bm25", "dense"], fusion=fusion, weights=weights, top_k=TOP_K)
    query.connect("embedder.embedding", "dense.query_embedding")
    return query, (lambda q: {"bm25": {"query": q}, "embedder": {"text": q}})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", choices=sorted(TIERS), default="squad-mv")
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument("--questions", type=Path, default=None, help="Questions in squad-mv train.jsonl format.")
    parser.add_argument("--model", default=None, help="Backbone for the zero-shot systems (default: packaged MiniLM).")
    parser.add_argument("--model-name", default="MiniLM", help="How the zero-shot systems' names call --model.")
    parser.add_argument(
        "--checkpoint", action="append", default=[], metavar="NAME=DIR", help="Trained multi-view model."
    )
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--limit-questions", type=int, default=None)
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    parser.add_argument(
        "--systems",
        default=",".join(SYSTEMS),
        help=f"Comma-separated subset of {SYSTEMS}; 'hybrid' fuses BM25 with the best multi-view system run here.",
    )
    parser.add_argument("--update", action="store_true", help="Merge into the tier's existing results file.")
    parser.add_argument(
        "--hybrid-weights",
        type=lambda v: [float(w) for w in v.split(",")],
        default=None,
        metavar="BM25,DENSE",
        help="Fusion weights of the hybrid (default equal); pick them on training questions, never on dev.",
    )
    parser.add_argument(
        "--hybrid-fusion",
        choices=("rrf", "convex"),
        default="rrf",
        help="rrf: reciprocal rank fusion; convex: min-max normalised scores summed with the weights.",
    )
    parser.add_argument(
        "--store-dir",
        type=Path,
        default=None,
        help="Save each encoded multi-view corpus here, every 1,024 documents, and reuse it on later runs: a stopped "
        "encoding resumes from its last saved chunk, a finished one is not re-encoded.",
    )
    parser.add_argument(
        "--index-factories",
        nargs="+",
        default=[],
        metavar="FACTORY[@PARAM=N,...]",
        help="Also evaluate every multi-view system over these compressed FAISS indexes, trained once per "
        "factory and searched with each setting (e.g. 'OPQ64,IVF1024,PQ64@nprobe=32,128').",
    )
    args = parser.parse_args()
    systems = {s.strip() for s in args.systems.split(",") if s.strip()}
    if not systems <= set(SYSTEMS):
        parser.error(f"unknown --systems {sorted(systems - set(SYSTEMS))}; choose from {SYSTEMS}")

    if args.questions:
        questions = load_questions(args.questions)
    else:
        questions = split_by_article(load_questions(args.data_dir / "squad-mv" / "train.jsonl"))[1]
    questions = questions[: args.limit_questions]
    docs = load_tier(args.tier, args.data_dir)
    model = args.model or packaged_minilm()
    print(f"tier {args.tier}: {len(docs)} documents, {len(questions)} questions")

    results: dict[str, dict[str, float]] = {}
    machines: dict[str, str] = {}
    machine = machine_label()

    def measure(name: str, query: Pipeline, inputs, output: str, index_seconds: float) -> None:
        start = time.perf_counter()
        ranked = run_query_pipeline(query, questions, inputs=inputs, output_component=output)
        metrics = evaluate_ranking(ranked)
        metrics["index_seconds"] = round(index_seconds, 1)
        metrics["query_ms"] = round(1000 * (time.perf_counter() - start) / len(questions), 2)
        results[name] = metrics
        machines[name] = machine
        print(markdown_table({name: metrics}, metrics=COLUMNS), flush=True)

    if systems & {"bm25", "hybrid"}:
        bm25_query, bm25_inputs, _ = bm25_system(docs)
        if "bm25" in systems:
            measure("BM25 (InMemoryBM25Retriever)", bm25_query, bm25_inputs, "retriever", 0.0)
    if "single-vector" in systems:
        st_query, st_inputs, seconds = st_single_vector_system(docs, model, args.batch_size)
        measure(
            f"{args.model_name} single-vector (sentence-transformers + InMemoryEmbeddingRetriever)",
            st_query,
            st_inputs,
            "retriever",
            seconds,
        )
        del st_query

    multi_view = {f"{args.model_name} snippet-pooled multi-view (zero-shot)": model} if "snippet" in systems else {}
    for spec in args.checkpoint if systems & {"checkpoints", "hybrid"} else []:
        name, _, path = spec.rpartition("=")
        multi_view[name] = path
    best_name, best = None, None
    for name, path in multi_view.items():
        saved = args.store_dir / f"{args.tier}-{slug(name)}" if args.store_dir else None
        store, seconds, views = multi_view_store(docs, path, args.batch_size, saved)
        if "checkpoints" in systems or path == model:
            query, inputs = multi_view_system(store, path)
            measure(name, query, inputs, "retriever", seconds)
            score = results[name]["gold_R@5"] + results[name]["gold_R@1"]
            for spec in args.index_factories:
                with tempfile.TemporaryDirectory() as scratch:
                    for label, compressed, info in compressed_stores(docs, views, spec, Path(scratch)):
                        query, inputs = multi_view_system(compressed, path)
                        measure(f"{name} [{label}]", query, inputs, "retriever", seconds)
                        results[f"{name} [{label}]"].update(info)
                        del compressed
        else:  # a checkpoint given only as the hybrid's dense side
            score = float("inf")
        if best is None or score > best[0]:
            best_name, best = name, (score, store, path)
    if "hybrid" in systems:
        if best is None:
            parser.error("--systems hybrid needs a multi-view system: add snippet or a --checkpoint")
        hybrid_query, hybrid_inputs = hybrid_system(
            bm25_query, best[1], best[2], args.hybrid_weights, args.hybrid_fusion
        )
        weighted = f", weights {args.hybrid_weights}" if args.hybrid_weights else ""
        how = "RRF" if args.hybrid_fusion == "rrf" else "min-max scores, merge"
        measure(
            f"Hybrid BM25 + {best_name} (DocumentJoiner {how}{weighted})", hybrid_query, hybrid_inputs, "joiner", 0.0
        )

    args.output_dir.mkdir(parents=True, exist_ok=True)
    stem = args.output_dir / args.tier
    commands = [command_line() or "python -m benchmarks.quality"]
    if args.update and stem.with_suffix(".json").exists():
        previous = json.loads(stem.with_suffix(".json").read_text(encoding="utf-8"))
        if previous["documents"] != len(docs) or previous["questions"] != len(questions):
            parser.error(f"{stem}.json holds another corpus or question set; run without --update")
        old_machines = previous.get("machines") or dict.fromkeys(previous["systems"], previous.get("machine", "?"))
        results = {**previous["systems"], **results}
        machines = {**old_machines, **machines}
        commands = previous.get("commands", [previous["command"]] if "command" in previous else []) + commands
    payload = {
        "tier": args.tier,
        "documents": len(docs),
        "questions": len(questions),
        "question_source": str(args.questions or "squad-mv dev split (haystack_mvr.datasets.DEV_ARTICLES)"),
        "machines": machines,
        "commands": commands,
        "date": utc_now(),
        "metrics_are": "fractions; the markdown table prints @k metrics as percentages",
        "systems": results,
    }
    extra = ["index_bytes_per_view"] if any("index_bytes_per_view" in m for m in results.values()) else []
    table = markdown_table(results, metrics=[*COLUMNS, "index_seconds", "query_ms", *extra])
    written = "; ".join(f"`{c}`" for c in commands)
    title = f"# {args.tier}: {len(docs)} documents, {len(questions)} dev questions"
    write_results(stem, payload, markdown=f"{title}\n\nWritten by {written}.\n\n{table}")
    print(f"\n{table}\nwrote {stem}.json and .md")


def slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")


if __name__ == "__main__":
    main()
