"""The squad-mv+200k tier (202,067 documents) on a CPU: encoded once, in resumable chunks, then evaluated.

    python -m benchmarks.full_tier encode --worker 0 --workers 2 &   # each worker: 1 torch thread, its own chunks
    python -m benchmarks.full_tier encode --worker 1 --workers 2 &
    python -m benchmarks.full_tier evaluate --index-factories "OPQ48,PQ48"

``quality.py`` runs a tier in one go; at 200k documents that is about two hours of encoding per dense system on
this 2-core machine, and a session can stop at any time. Here the encoding goes through the real
``MultiViewDocumentEmbedder`` (packaged all-MiniLM-L6-v2, titles embedded as in ``quality.py``) in chunks of
``--chunk-size`` documents, each saved atomically to ``--cache-dir`` (never committed) so that a stopped run
resumes where it stopped. One pass gives both dense systems: view 0 is the model's own pooling of the whole text,
i.e. the single vector (checked against sentence-transformers' ``encode`` on a sample), views 1.. are the snippet
views.

``evaluate`` ranks the dev questions with Haystack pipelines:

- BM25: ``bm25s`` (English stopwords, title + text, as the data README's reference figures) as a small Haystack
  component; Haystack's ``InMemoryBM25Retriever`` takes seconds per query at this size (288 ms at 22k).
- single vector: view 0 in a Flat ``FaissMultiViewDocumentStore`` (exact inner product, one view per document).
- snippet multi-view (zero-shot): all views in a Flat store, ``MultiViewTextEmbedder`` + ``MultiViewRetriever``.
- the convex hybrid: min-max normalised BM25 and snippet scores, merged with weights [0.4, 0.6] (picked on training
  questions at squad-mv+20k by ``hybrid_weights.py``), through ``add_fusion_joiner``.
- compressed rows: the snippet store reloaded under each ``--index-factories`` spec (bytes per view, recall cost).

Writes ``benchmarks/results/squad-mv+200k.{json,md}`` naming the machine and the encoding budget.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from haystack import Document, Pipeline, component

from benchmarks.harness import machine_label, utc_now, write_results
from benchmarks.quality import COLUMNS, RESULTS, TIERS, compressed_stores, load_tier, multi_view_system, packaged_minilm

TIER = "squad-mv+200k"
TOP_K = 100
HYBRID_WEIGHTS = [0.4, 0.6]
STOPWORDS = "en"


def tier_and_questions(args: argparse.Namespace) -> tuple[list[Document], list]:
    """The tier's documents in file order and the dev questions; a smoke test keeps a few of each."""
    from haystack_mvr.datasets import load_questions, split_by_article

    docs = load_tier(TIER, args.data_dir)
    questions = split_by_article(load_questions(args.data_dir / "squad-mv" / "train.jsonl"))[1]
    if args.limit_documents:  # smoke test: the first dev questions' gold paragraphs, then the first documents
        questions = questions[: args.limit_documents // 10]
        gold = {q.positive_id for q in questions}
        docs = [d for d in docs if d.id in gold] + [d for d in docs if d.id not in gold][: args.limit_documents]
    return docs, questions[: args.limit_questions]


def chunk_path(cache: Path, index: int) -> Path:
    return cache / f"chunk-{index:05d}.npz"


def encode(args: argparse.Namespace) -> None:
    """Encode this worker's missing chunks (chunk ``i`` belongs to worker ``i % workers``)."""
    import torch

    from haystack_mvr.components.embedders import MultiViewDocumentEmbedder
    from haystack_mvr.modeling.sentence_splitting import splitter_name
    from haystack_mvr.views import SPANS_KEY, document_views

    torch.set_num_threads(args.threads)
    docs, _ = tier_and_questions(args)
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    embedder = MultiViewDocumentEmbedder(
        model=args.model, meta_fields_to_embed=["title"], batch_size=args.batch_size, progress_bar=False
    )
    embedder.warm_up()
    n_chunks = -(-len(docs) // args.chunk_size)
    mine = [
        i for i in range(n_chunks) if i % args.workers == args.worker and not chunk_path(args.cache_dir, i).exists()
    ]
    print(f"worker {args.worker}: {len(mine)} of {n_chunks} chunks to encode", flush=True)
    for i in mine:
        part = docs[i * args.chunk_size : (i + 1) * args.chunk_size]
        start = time.perf_counter()
        embedded = embedder.run(part)["documents"]
        seconds = time.perf_counter() - start
        matrices = [document_views(d) for d in embedded]
        counts = np.array([len(m) for m in matrices], dtype=np.int32)
        views = np.concatenate(matrices)
        spans = np.array(
            [
                (-1, -1) if s is None else tuple(s)
                for d, m in zip(embedded, matrices, strict=True)
                for s in (d.meta.get(SPANS_KEY) or [None] * len(m))
            ],
            dtype=np.int32,
        )
        target = chunk_path(args.cache_dir, i)
        tmp = target.with_suffix(".tmp.npz")
        np.savez(
            tmp,
            ids=np.array([d.id for d in embedded]),
            counts=counts,
            views=views,
            spans=spans,
            seconds=np.float64(seconds),
            threads=np.int32(args.threads),
            splitter=np.array(splitter_name()),
        )
        os.replace(tmp, target)
        print(
            f"chunk {i}: {len(part)} docs, {counts.sum()} views, {seconds:.0f} s ({len(part) / seconds:.1f} docs/s)",
            flush=True,
        )


def load_chunks(cache: Path, docs: list[Document], chunk_size: int) -> tuple[list[np.ndarray], list, dict]:
    """Per document its views and spans, in tier order; and how the chunks were encoded (seconds summed, torch
    threads, sentence splitters)."""
    n_chunks = -(-len(docs) // chunk_size)
    missing = [i for i in range(n_chunks) if not chunk_path(cache, i).exists()]
    if missing:
        msg = f"{len(missing)} of {n_chunks} chunks are not encoded yet (first: {missing[:5]}); run encode first."
        raise SystemExit(msg)
    views, spans = [], []
    encoding = {"seconds": 0.0, "threads": set(), "splitters": set()}
    for i in range(n_chunks):
        with np.load(chunk_path(cache, i)) as z:
            ids = z["ids"].tolist()
            expected = [d.id for d in docs[i * chunk_size : (i + 1) * chunk_size]]
            if ids != expected:
                msg = f"{chunk_path(cache, i)} holds other documents than the tier's chunk {i}; delete it."
                raise SystemExit(msg)
            offsets = np.concatenate([[0], np.cumsum(z["counts"])])
            all_views, all_spans = z["views"], z["spans"]
            for a, b in itertools.pairwise(offsets):
                views.append(all_views[a:b])
                spans.append([None if s[0] < 0 else [int(s[0]), int(s[1])] for s in all_spans[a:b]])
            encoding["seconds"] += float(z["seconds"])
            encoding["threads"].add(int(z["threads"]))
            encoding["splitters"].add(str(z["splitter"]))
    return views, spans, encoding


class Bm25sIndex:
    """BM25 over a fixed corpus with ``bm25s`` (title + text, English stopwords)."""

    def __init__(self, documents: list[Document]) -> None:
        import bm25s

        self.documents = documents
        corpus = [f"{d.meta.get('title', '')}\n\n{d.content}" for d in documents]
        self.model = bm25s.BM25()
        self.model.index(bm25s.tokenize(corpus, stopwords=STOPWORDS, show_progress=False), show_progress=False)


@component
class Bm25sRetriever:
    """A Haystack retriever over a ``Bm25sIndex``: the top_k scored Documents for a query."""

    def __init__(self, index: Bm25sIndex, top_k: int = TOP_K) -> None:
        self.index = index
        self.top_k = top_k

    @component.output_types(documents=list[Document])
    def run(self, query: str) -> dict[str, list[Document]]:
        import bm25s

        tokens = bm25s.tokenize([query], stopwords=STOPWORDS, show_progress=False)
        rows, scores = self.index.model.retrieve(
            tokens, k=min(self.top_k, len(self.index.documents)), show_progress=False
        )
        docs = self.index.documents
        return {
            "documents": [
                Document(id=docs[r].id, content=docs[r].content, meta=docs[r].meta, score=float(s))
                for r, s in zip(rows[0], scores[0], strict=True)
                if s > 0
            ]
        }


def evaluate(args: argparse.Namespace) -> None:
    import faiss
    import torch
    from sentence_transformers import SentenceTransformer

    from haystack_mvr.components.embedders import MultiViewTextEmbedder
    from haystack_mvr.components.joiners import add_fusion_joiner
    from haystack_mvr.components.retrievers import MultiViewRetriever
    from haystack_mvr.document_stores import FaissMultiViewDocumentStore
    from haystack_mvr.evaluation.pipeline_evaluation import evaluate_ranking, run_query_pipeline
    from haystack_mvr.evaluation.report import markdown_table
    from haystack_mvr.views import SPANS_KEY, VIEWS_KEY

    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    docs, questions = tier_and_questions(args)
    views, spans, encoding = load_chunks(args.cache_dir, docs, args.chunk_size)
    encode_seconds = encoding["seconds"]
    n_views = sum(len(v) for v in views)
    print(f"{TIER}: {len(docs)} documents, {n_views} views, {len(questions)} dev questions", flush=True)

    # The single vector is view 0: check it against sentence-transformers' own encode on a sample.
    st = SentenceTransformer(args.model, device="cpu", local_files_only=True)
    sample = list(range(0, len(docs), len(docs) // 32))[:32]
    st_docs = st.encode([f"{docs[i].meta['title']}\n{docs[i].content}" for i in sample], normalize_embeddings=False)
    global_views = np.stack([views[i][0] for i in sample])
    cos = (st_docs * global_views).sum(1) / np.linalg.norm(st_docs, axis=1) / np.linalg.norm(global_views, axis=1)
    checks = {"min_cosine_view0_vs_st_encode": float(cos.min()), "sampled_documents": len(sample)}
    print(json.dumps(checks), flush=True)
    del st

    results: dict[str, dict[str, float]] = {}
    machine = machine_label(threads=args.threads, detail="torch and FAISS")

    def measure(name: str, query: Pipeline, inputs, output: str, index_seconds: float, **info) -> None:
        start = time.perf_counter()
        ranked = run_query_pipeline(query, questions, inputs=inputs, output_component=output)
        metrics = evaluate_ranking(ranked)
        metrics["index_seconds"] = round(index_seconds, 1)
        metrics["query_ms"] = round(1000 * (time.perf_counter() - start) / len(questions), 2)
        metrics.update(info)
        results[name] = metrics
        print(markdown_table({name: metrics}, metrics=COLUMNS), flush=True)

    def store_of(view_slice: slice) -> tuple[FaissMultiViewDocumentStore, float]:
        store = FaissMultiViewDocumentStore(index_factory="Flat", search_threads=args.threads)
        start = time.perf_counter()
        for lo in range(0, len(docs), 10_000):
            batch = []
            for d, v, s in zip(docs[lo : lo + 10_000], views[lo : lo + 10_000], spans[lo : lo + 10_000], strict=True):
                meta = {**d.meta, VIEWS_KEY: v[view_slice]}
                if any(x is not None for x in s[view_slice]):
                    meta[SPANS_KEY] = s[view_slice]
                batch.append(Document(id=d.id, content=d.content, meta=meta))
            store.write_documents(batch)
        return store, time.perf_counter() - start

    bm25_start = time.perf_counter()
    bm25 = Bm25sIndex(docs)
    bm25_seconds = time.perf_counter() - bm25_start
    bm25_query = Pipeline()
    bm25_query.add_component("retriever", Bm25sRetriever(bm25))
    measure("BM25 (bm25s, title + text)", bm25_query, lambda q: {"retriever": {"query": q}}, "retriever", bm25_seconds)

    single, write_seconds = store_of(slice(0, 1))
    query, inputs = multi_view_system(single, args.model)
    measure(
        "MiniLM single vector (view 0: the model's own pooling; Flat)",
        query,
        inputs,
        "retriever",
        encode_seconds + write_seconds,
    )
    del single, query

    snippet, write_seconds = store_of(slice(None))
    name = "MiniLM snippet-pooled multi-view (zero-shot)"
    query, inputs = multi_view_system(snippet, args.model)
    measure(name, query, inputs, "retriever", encode_seconds + write_seconds)

    hybrid = Pipeline()
    hybrid.add_component("bm25", Bm25sRetriever(bm25))
    hybrid.add_component("embedder", MultiViewTextEmbedder(model=args.model))
    hybrid.add_component("dense", MultiViewRetriever(document_store=snippet, top_k=TOP_K))
    hybrid.connect("embedder.embedding", "dense.query_embedding")
    add_fusion_joiner(hybrid, ["bm25", "dense"], fusion="convex", weights=HYBRID_WEIGHTS, top_k=TOP_K)
    measure(
        f"Hybrid BM25 + {name} (DocumentJoiner min-max scores, merge, weights {HYBRID_WEIGHTS})",
        hybrid,
        lambda q: {"bm25": {"query": q}, "embedder": {"text": q}},
        "joiner",
        0.0,
    )
    del hybrid

    for spec in args.index_factories:
        with tempfile.TemporaryDirectory(dir=args.cache_dir) as scratch:
            for label, compressed, info in compressed_stores(docs, views, spec, Path(scratch)):
                query, inputs = multi_view_system(compressed, args.model)
                measure(f"{name} [{label}]", query, inputs, "retriever", encode_seconds, **info)
                del compressed, query

    payload = {
        "tier": TIER,
        "documents": len(docs),
        "views": n_views,
        "questions": len(questions),
        "question_source": "squad-mv dev split (haystack_mvr.datasets.DEV_ARTICLES)",
        "machine": machine,
        "encoding": (
            f"CPU background run: {encode_seconds / 3600:.2f} h summed over {args.chunk_size}-document chunks "
            f"(torch threads per worker: {sorted(encoding['threads'])}), machine shared with other jobs"
        ),
        "sentence_splitter": sorted(encoding["splitters"]),
        "date": utc_now(),
        "checks": checks,
        "metrics_are": "fractions; the markdown table prints @k metrics as percentages",
        "systems": results,
    }
    stem = args.output_dir / TIER
    write_results(stem, payload)
    extra = ["index_bytes_per_view"] if any("index_bytes_per_view" in m for m in results.values()) else []
    table = markdown_table(results, metrics=[*COLUMNS, "index_seconds", "query_ms", *extra])
    stem.with_suffix(".md").write_text(
        f"# {TIER}: {len(docs)} documents ({n_views} views), {len(questions)} dev questions\n\n"
        f"Machine: {machine}; {payload['date']}. Encoding: {payload['encoding']}. One encoding pass gives both dense "
        f"systems (view 0 vs sentence-transformers' encode: min cosine {checks['min_cosine_view0_vs_st_encode']:.6f} "
        f"on {checks['sampled_documents']} sampled documents). index_seconds of the dense systems is the encoding "
        "plus the store write; query_ms includes embedding the question. "
        "Reproduce: `python -m benchmarks.full_tier encode` (resumable) then `python -m benchmarks.full_tier evaluate`."
        f"\n\n{table}",
        encoding="utf-8",
    )
    print(f"\n{table}\nwrote {stem}.json, .md", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("phase", choices=("encode", "evaluate"))
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--model", default=None, help="Backbone (default: the packaged all-MiniLM-L6-v2).")
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=Path.home() / ".cache" / "haystack-mvr-benchmarks" / TIER,
        help="Where encoded chunks are kept between runs (outside the repository).",
    )
    parser.add_argument("--chunk-size", type=int, default=4096)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="torch (and FAISS) threads, pinned.")
    parser.add_argument("--worker", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--limit-questions", type=int, default=None)
    parser.add_argument("--limit-documents", type=int, default=None, help="Smoke test: the tier's first N documents.")
    parser.add_argument("--index-factories", nargs="*", default=["OPQ48,PQ48"], metavar="FACTORY[@PARAM=N,...]")
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    args = parser.parse_args()
    assert TIERS[TIER] == 200_000
    args.model = args.model or packaged_minilm()
    if args.data_dir is None:
        from haystack_mvr.datasets import default_data_dir

        args.data_dir = default_data_dir()
    encode(args) if args.phase == "encode" else evaluate(args)


if __name__ == "__main__":
    main()
