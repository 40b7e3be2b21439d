"""Qdrant multi-view store vs the FAISS Flat store on the same views (issue #14).

    python -m benchmarks.qdrant_store                    # squad-mv, dev questions; ~5 min encoding on 2 cores
    python -m benchmarks.qdrant_store --limit-questions 100

The squad-mv corpus (2,067 paragraphs, title embedded before the text as in ``quality.py``) is encoded ONCE by
the packaged all-MiniLM-L6-v2 in snippet mode, and the dev questions (``haystack_mvr.datasets.DEV_ARTICLES``)
once by the text embedder; both are cached under ``/tmp`` (``--cache-dir``), never in the repository. The SAME
documents, views and spans are written into ``FaissMultiViewDocumentStore(index_factory="Flat")`` and into
``QdrantMultiViewDocumentStore(location=":memory:", exact=True)`` (qdrant-client's local mode: a pure-Python
engine), then every question is searched in both (top-100):

- rankings are compared document by document; a difference is reported with the two scores involved (a
  difference inside float32 rounding is a tie broken differently, anything else would be a bug);
- gold top-k accuracy must be equal;
- latency: ``search`` per query and ``search_batch`` over all questions, interleaved store by store after a
  warm-up; torch and FAISS pinned to one thread. Local mode is not a Qdrant server: the ratio says what the
  pure-Python engine costs, not what a server costs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
from haystack import Document

from benchmarks.harness import RESULTS, machine_label, utc_now, write_results
from benchmarks.packaged_model import packaged_minilm
from haystack_mvr.datasets import default_data_dir, load_corpus, load_questions, split_by_article
from haystack_mvr.views import SPANS_KEY, attach_views, document_views

TOP_K = 100
TIE_TOLERANCE = 1e-5


def encode(passages, questions, model: str, cache: Path, batch_size: int) -> tuple[list[Document], np.ndarray]:
    """Documents carrying their views, and the ``(n, d)`` query embeddings; from ``cache`` when it holds them."""
    cache.mkdir(parents=True, exist_ok=True)
    views_path, queries_path, index_path = cache / "views.npy", cache / "queries.npy", cache / "index.json"
    docs = [Document(id=p.id, content=p.text, meta={"title": p.title}) for p in passages]
    if views_path.exists() and queries_path.exists() and index_path.exists():
        index = json.loads(index_path.read_text(encoding="utf-8"))
        if index["ids"] == [d.id for d in docs] and index["questions"] == [q.id for q in questions]:
            views = np.load(views_path)
            queries = np.load(queries_path)
            out = []
            for doc, start, stop, spans in zip(docs, index["starts"], index["stops"], index["spans"], strict=True):
                out.append(attach_views(doc, views[start:stop], [None if s is None else tuple(s) for s in spans]))
            print(f"loaded views and queries from {cache}")
            return out, queries
    from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder

    start = time.perf_counter()
    embedder = MultiViewDocumentEmbedder(model=model, meta_fields_to_embed=["title"], batch_size=batch_size)
    encoded = embedder.run(docs)["documents"]
    text_embedder = MultiViewTextEmbedder(model=model)
    text_embedder.warm_up()
    assert text_embedder.encoder is not None
    queries = np.asarray(
        text_embedder.encoder.encode_queries([q.question for q in questions], batch_size=batch_size), dtype=np.float32
    )
    print(f"encoded {len(docs)} documents and {len(questions)} questions in {time.perf_counter() - start:.0f} s")
    matrices = [document_views(d) for d in encoded]
    stops = np.cumsum([m.shape[0] for m in matrices]).tolist()
    index = {
        "ids": [d.id for d in docs],
        "questions": [q.id for q in questions],
        "starts": [0, *stops[:-1]],
        "stops": stops,
        "spans": [d.meta.get(SPANS_KEY) or [None] * m.shape[0] for d, m in zip(encoded, matrices, strict=True)],
    }
    np.save(views_path, np.concatenate(matrices))
    np.save(queries_path, queries)
    index_path.write_text(json.dumps(index), encoding="utf-8")
    return encoded, queries


def compare(docs: list[Document], questions, queries: np.ndarray, args: argparse.Namespace) -> None:
    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
    from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore
    from haystack_mvr.evaluation.pipeline_evaluation import RankedResults, evaluate_ranking

    stores = {
        "faiss": FaissMultiViewDocumentStore(index_factory="Flat"),
        "qdrant": QdrantMultiViewDocumentStore(location=":memory:", exact=True),
    }
    write_seconds = {}
    for name, store in stores.items():
        start = time.perf_counter()
        store.write_documents(docs)
        write_seconds[name] = round(time.perf_counter() - start, 2)
    n_views = sum(len(document_views(d)) for d in docs)
    print(f"{len(docs)} documents, {n_views} views, d={queries.shape[1]}; write seconds {write_seconds}")

    # Rankings (top-100) and latency (top-10, the retriever's default), interleaved query by query.
    ranked: dict[str, list[list[Document]]] = {name: [] for name in stores}
    latency: dict[str, list[float]] = {name: [] for name in stores}
    order = list(stores)
    for name in order:  # warm-up
        stores[name].search(queries[0], top_k=10)
    for i, query in enumerate(queries):
        for name in order[i % 2 :] + order[: i % 2]:
            ranked[name].append(stores[name].search(query, top_k=TOP_K))
            start = time.perf_counter()
            stores[name].search(query, top_k=10)
            latency[name].append(1000 * (time.perf_counter() - start))
    batch_ms = {}
    for name, store in stores.items():
        start = time.perf_counter()
        store.search_batch(queries, top_k=10)
        batch_ms[name] = 1000 * (time.perf_counter() - start) / len(queries)

    differences, tie_only = [], True
    for question, ours, theirs in zip(questions, ranked["qdrant"], ranked["faiss"], strict=True):
        a, b = [d.id for d in ours], [d.id for d in theirs]
        if a == b:
            continue
        at = next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
        gap = abs(ours[at].score - theirs[at].score)
        score_of = {d.id: d.score for d in theirs}
        tie = gap <= TIE_TOLERANCE and abs(score_of.get(a[at], -np.inf) - ours[at].score) <= TIE_TOLERANCE
        tie_only &= tie
        differences.append(
            {
                "question": question.id,
                "rank": at + 1,
                "qdrant": [a[at], round(ours[at].score, 7)],
                "faiss": [b[at], round(theirs[at].score, 7)],
                "reason": "tie within float32 rounding, broken differently" if tie else "scores differ",
            }
        )
    max_score_gap = max(
        abs(x.score - y.score)
        for ours, theirs in zip(ranked["qdrant"], ranked["faiss"], strict=True)
        for x, y in zip(ours, theirs, strict=True)
    )
    quality = {name: evaluate_ranking(RankedResults(list(questions), lists)) for name, lists in ranked.items()}
    result = {
        "date": utc_now(),
        "machine": machine_label(threads=1),
        "qdrant_client": _version("qdrant-client"),
        "mode": "qdrant-client local mode (location=':memory:', pure-Python engine), exact=True",
        "documents": len(docs),
        "views": n_views,
        "dim": int(queries.shape[1]),
        "questions": len(questions),
        "top_k_compared": TOP_K,
        "identical_rankings": len(questions) - len(differences),
        "differences": differences,
        "differences_are_ties_only": tie_only,
        "max_abs_score_difference": float(max_score_gap),
        "quality": {n: {k: round(float(v), 4) for k, v in m.items()} for n, m in quality.items()},
        "write_seconds": write_seconds,
        "search_ms_median": {n: round(statistics.median(v), 2) for n, v in latency.items()},
        "search_ms_p90": {n: round(float(np.percentile(v, 90)), 2) for n, v in latency.items()},
        "search_batch_ms_per_query": {n: round(v, 2) for n, v in batch_ms.items()},
    }
    result["latency_ratio_qdrant_local_vs_faiss"] = round(
        result["search_ms_median"]["qdrant"] / result["search_ms_median"]["faiss"], 1
    )
    if not args.no_edge:
        result["edge"] = edge_recall(docs, queries, ranked["faiss"], args.hnsw_ef)
    write_results(args.output_dir / "qdrant_store", result, markdown=markdown(result))
    print(markdown(result))


def edge_recall(docs: list[Document], queries: np.ndarray, faiss_ranked, efs: list[int]) -> dict:
    """
    The same views in Qdrant's own Rust engine, in process (qdrant-edge-py): the collection layout the store
    creates (multivector, Dot, MAX_SIM), queried with ``[q]``. Exact search must give FAISS's top-100; HNSW over
    the multivectors (m=16, ef_construct=100, the server's defaults) is measured as recall@10 against exact.
    """
    import shutil
    import tempfile

    import qdrant_edge as qe

    folder = tempfile.mkdtemp(prefix="mvr-edge-")
    try:
        config = qe.EdgeConfig(
            vectors={
                "mvr_views": qe.EdgeVectorParams(
                    size=int(queries.shape[1]),
                    distance=qe.Distance.Dot,
                    multivector_config=qe.MultiVectorConfig(comparator=qe.MultiVectorComparator.MaxSim),
                )
            },
            hnsw_config=qe.HnswIndexConfig(m=16, ef_construct=100, full_scan_threshold=10),
            optimizers=qe.EdgeOptimizersConfig(indexing_threshold=1, default_segment_number=1),
            max_search_threads=1,
        )
        shard = qe.EdgeShard.create(folder, config)
        ids = [d.id for d in docs]
        points = [qe.Point(id=i, vector={"mvr_views": document_views(d).tolist()}) for i, d in enumerate(docs)]
        for start in range(0, len(points), 256):
            shard.update(qe.UpdateOperation.upsert_points(points[start : start + 256]))
        start = time.perf_counter()
        shard.optimize()  # builds the HNSW graph over the multivectors
        build_seconds = time.perf_counter() - start

        def query(q: np.ndarray, limit: int, params) -> list[str]:
            request = qe.QueryRequest(
                limit=limit, query=qe.Query.Nearest([q.tolist()], using="mvr_views"), params=params, with_payload=False
            )
            return [ids[p.id] for p in shard.query(request)]

        exact, exact_ms = [], []
        for q in queries:
            start = time.perf_counter()
            exact.append(query(q, TOP_K, qe.SearchParams(exact=True)))
            exact_ms.append(1000 * (time.perf_counter() - start))
        same = sum(a == [d.id for d in b] for a, b in zip(exact, faiss_ranked, strict=True))
        sweep = {}
        for ef in efs:
            hits, times = 0, []
            for q, truth in zip(queries, exact, strict=True):
                start = time.perf_counter()
                got = query(q, 10, qe.SearchParams(hnsw_ef=ef))
                times.append(1000 * (time.perf_counter() - start))
                hits += len(set(got) & set(truth[:10]))
            sweep[str(ef)] = {
                "recall@10": round(hits / (10 * len(queries)), 4),
                "ms_median": round(statistics.median(times), 3),
            }
        info = shard.info()
        shard.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {
        "engine": f"qdrant-edge-py {_version('qdrant-edge-py')} (Qdrant's Rust engine in process, 1 search thread)",
        "hnsw": {"m": 16, "ef_construct": 100},
        "indexed_vectors": info.indexed_vectors_count,
        "hnsw_build_seconds": round(build_seconds, 1),
        "exact_top100_equal_to_faiss": same,
        "exact_ms_median_top100": round(statistics.median(exact_ms), 3),
        "hnsw_ef": sweep,
    }


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


def markdown(r: dict) -> str:
    q, f = r["quality"]["qdrant"], r["quality"]["faiss"]
    metrics = [k for k in ("gold_R@1", "gold_R@5", "gold_R@20", "gold_R@100", "MRR@10") if k in q]
    lines = [
        "# Qdrant multi-view store vs FAISS Flat (same views)",
        "",
        f"{r['date']}; {r['machine']}; qdrant-client {r['qdrant_client']}, {r['mode']}.",
        f"squad-mv: {r['documents']:,} documents, {r['views']:,} snippet-mode views (packaged all-MiniLM-L6-v2, "
        f"d={r['dim']}), {r['questions']:,} dev questions. `python -m benchmarks.qdrant_store`",
        "",
        f"**Rankings**: top-{r['top_k_compared']} identical for {r['identical_rankings']:,} of {r['questions']:,} "
        f"questions; largest score difference {r['max_abs_score_difference']:.1e}.",
    ]
    if r["differences"]:
        lines.append(
            f"{len(r['differences'])} differ"
            + (
                ", every one a tie within float32 rounding broken the other way:"
                if r["differences_are_ties_only"]
                else ":"
            )
        )
        lines += [
            f"- question {d['question']}, rank {d['rank']}: Qdrant {d['qdrant'][0]} ({d['qdrant'][1]}), "
            f"FAISS {d['faiss'][0]} ({d['faiss'][1]}): {d['reason']}"
            for d in r["differences"][:20]
        ]
    lines += [
        "",
        "| store | " + " | ".join(metrics) + " | search ms (median / p90) | search_batch ms / query | write s |",
        "|---|" + "---:|" * (len(metrics) + 3),
    ]
    for name, label, m in (("faiss", "FAISS Flat", f), ("qdrant", "Qdrant local mode, exact", q)):
        lines.append(
            f"| {label} | "
            + " | ".join(f"{100 * m[k]:.1f}" for k in metrics)
            + f" | {r['search_ms_median'][name]} / {r['search_ms_p90'][name]}"
            + f" | {r['search_batch_ms_per_query'][name]} | {r['write_seconds'][name]} |"
        )
    if "edge" in r:
        e = r["edge"]
        lines += [
            "",
            f"## Qdrant's own engine: {e['engine']}",
            "",
            f"Exact MAX_SIM search over the same multivectors: top-{r['top_k_compared']} equal to FAISS for "
            f"{e['exact_top100_equal_to_faiss']:,} of {r['questions']:,} questions "
            f"({e['exact_ms_median_top100']} ms median). HNSW over the multivectors (m={e['hnsw']['m']}, "
            f"ef_construct={e['hnsw']['ef_construct']}, built in {e['hnsw_build_seconds']} s),"
            " recall@10 against exact:",
            "",
            "| hnsw_ef | recall@10 | ms / query (median) |",
            "|---:|---:|---:|",
        ]
        lines += [f"| {ef} | {100 * v['recall@10']:.2f} | {v['ms_median']} |" for ef, v in e["hnsw_ef"].items()]
    lines += [
        "",
        "Latency ratio (median search, top-10): Qdrant local mode / FAISS = "
        f"**{r['latency_ratio_qdrant_local_vs_faiss']}x**. "
        "Local mode is qdrant-client's pure-Python engine (numpy per point): it measures what the in-process engine "
        "costs, not a Qdrant server, whose Rust engine and HNSW index make the comparison a different one.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument("--model", default=None, help="Backbone (default: the packaged MiniLM).")
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/haystack_mvr_qdrant_store_bench"))
    parser.add_argument("--limit-questions", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--encode-only", action="store_true", help="Fill the cache and stop.")
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    parser.add_argument("--no-edge", action="store_true", help="Skip the qdrant-edge-py HNSW recall section.")
    parser.add_argument("--hnsw-ef", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    args = parser.parse_args()

    import faiss
    import torch

    torch.set_num_threads(1)
    faiss.omp_set_num_threads(1)
    passages = load_corpus(args.data_dir / "squad-mv" / "corpus.jsonl")
    questions = split_by_article(load_questions(args.data_dir / "squad-mv" / "train.jsonl"))[1]
    docs, queries = encode(passages, questions, args.model or packaged_minilm(), args.cache_dir, args.batch_size)
    if args.encode_only:
        return
    if args.limit_questions:
        questions, queries = questions[: args.limit_questions], queries[: args.limit_questions]
    compare(docs, questions, queries, args)


if __name__ == "__main__":
    main()
