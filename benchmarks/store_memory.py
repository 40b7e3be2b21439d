"""Process memory of FaissMultiViewDocumentStore with and without its float32 rows (``keep_vectors``).

    python -m benchmarks.store_memory                                  # 10^6 views, Flat and PQ48, ~10 min on 2 cores
    python -m benchmarks.store_memory --sizes 100000 --factories Flat  # smoke test

Every (size, index, keep_vectors) setting runs in a fresh Python process on a seeded synthetic corpus (d=384 unit
vectors, k correlated views a document around 1,000 topics: ``retrieval_speed.py``'s generator, at a1d91fe). It
writes the documents (views as numpy arrays in ``meta``), searches once (building the index), drops its copy of the
matrix and reports, per view: ``rss_bytes_per_view`` (resident after the build minus before the corpus existed:
Documents, row maps, float32 rows if kept, the index), ``peak_bytes_per_view`` (the process's peak minus the same
baseline; the generated matrix included), ``index_bytes_per_view`` (serialized), ``rows_bytes_per_view`` (float32
rows beside it), ``saved_bytes_per_view`` (what ``store.save`` writes); and ``top10_equal``, whether both settings
of ``keep_vectors`` return the same top 10 for 20 queries.

Writes ``benchmarks/results/store_memory.{json,md}``.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.harness import REPO, RESULTS, machine_label, write_results

N_TOPICS = 1000
DOC_SPREAD = 1.7  # norm of the noise added to a topic to make a document centre (cos to topic ~0.5)
VIEW_SPREAD = 0.75  # norm of the noise added to a document centre to make a view (cos to centre ~0.8)
QUERY_SPREAD = 1.0  # norm of the noise added to a view to make a query (cos to its view ~0.7)


def _normalize(x: np.ndarray) -> np.ndarray:
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def make_corpus(n_rows: int, k: int, dim: int, seed: int) -> np.ndarray:
    """``n_rows // k`` documents of ``k`` correlated unit views each, row-major by document."""
    rng = np.random.default_rng(seed)
    topics = _normalize(rng.standard_normal((N_TOPICS, dim), dtype=np.float32))
    n_docs = n_rows // k
    out = np.empty((n_docs * k, dim), dtype=np.float32)
    chunk = max(1, 65536 // k)
    for start in range(0, n_docs, chunk):
        stop = min(n_docs, start + chunk)
        centres = topics[rng.integers(0, N_TOPICS, stop - start)]
        centres += rng.standard_normal(centres.shape, dtype=np.float32) * np.float32(DOC_SPREAD / np.sqrt(dim))
        _normalize(centres)
        views = np.repeat(centres, k, axis=0)
        views += rng.standard_normal(views.shape, dtype=np.float32) * np.float32(VIEW_SPREAD / np.sqrt(dim))
        out[start * k : stop * k] = _normalize(views)
    return out


def make_queries(vectors: np.ndarray, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed + 1)
    q = vectors[rng.integers(0, len(vectors), n)].copy()
    q += rng.standard_normal(q.shape, dtype=np.float32) * np.float32(QUERY_SPREAD / np.sqrt(q.shape[1]))
    return np.ascontiguousarray(_normalize(q))


def rss_gib() -> float:
    try:
        with open("/proc/self/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("VmRSS"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return float("nan")


def directory_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def worker(size: int, factory: str, keep_vectors: bool, k: int, dim: int, seed: int) -> dict:
    import faiss
    from haystack import Document

    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
    from haystack_mvr.views import VIEWS_KEY

    gc.collect()
    base = rss_gib() * 2**30
    vectors = make_corpus(size, k, dim, seed)
    queries = make_queries(vectors, 20, seed)
    store = FaissMultiViewDocumentStore(embedding_dim=dim, index_factory=factory, keep_vectors=keep_vectors)
    n_docs = len(vectors) // k
    for lo in range(0, n_docs, 10_000):
        hi = min(n_docs, lo + 10_000)
        store.write_documents(
            [Document(id=str(i), meta={VIEWS_KEY: vectors[i * k : (i + 1) * k]}) for i in range(lo, hi)]
        )
    top10 = [[d.id for d in store.search(q, top_k=10)] for q in queries]
    n_rows = len(vectors)
    del vectors
    gc.collect()
    rss = rss_gib() * 2**30
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    index_bytes = len(faiss.serialize_index(store.faiss_index))
    with tempfile.TemporaryDirectory() as tmp:
        store.save(Path(tmp) / "store")
        saved = directory_bytes(Path(tmp) / "store")
    return {
        "size": n_rows,
        "k": k,
        "index_factory": factory,
        "keep_vectors": keep_vectors,
        "rss_bytes_per_view": (rss - base) / n_rows,
        "peak_bytes_per_view": (peak - base) / n_rows,
        "index_bytes_per_view": index_bytes / n_rows,
        "rows_bytes_per_view": store.stats().kept_vector_bytes / n_rows,
        # the labels of an IndexIDMap2 (8 B per row; its reverse hash map is not counted)
        "row_maps_bytes_per_view": (8 * n_rows if isinstance(store.faiss_index, faiss.IndexIDMap) else 0) / n_rows,
        "saved_bytes_per_view": saved / n_rows,
        "top10": top10,
    }


def render(results: dict) -> str:
    lines = [
        "# Store memory with and without float32 rows (`keep_vectors`)",
        "",
        f"Machine: {results['machine']}. d={results['dim']}, k={results['k']} views per document, synthetic corpus "
        "of 1,000 topics. Bytes per stored view; each row is its own fresh process.",
        "",
        "| views | index | keep_vectors | resident | peak | FAISS index | float32 rows | row maps | saved on disk "
        "| same top-10 |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results["rows"]:
        lines.append(
            f"| {r['size']:,} | {r['index_factory']} | {r['keep_vectors']} | {r['rss_bytes_per_view']:.0f} | "
            f"{r['peak_bytes_per_view']:.0f} | {r['index_bytes_per_view']:.1f} | {r['rows_bytes_per_view']:.0f} | "
            f"{r['row_maps_bytes_per_view']:.0f} | {r['saved_bytes_per_view']:.1f} | {r.get('top10_equal', '')} |"
        )
    lines += [
        "",
        "Resident = process memory after the build minus before the corpus existed (Documents, row maps, rows, "
        "index); peak includes the generated matrix and the rows held until the index is built.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000000", help="comma-separated numbers of view vectors")
    parser.add_argument("--factories", nargs="+", default=["Flat", "PQ48"])
    parser.add_argument("--k", type=int, default=8, help="views per document")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    parser.add_argument("--worker", nargs=3, metavar=("SIZE", "FACTORY", "KEEP"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        size, factory, keep = args.worker
        print(json.dumps(worker(int(size), factory, keep == "1", args.k, args.dim, args.seed)))
        return

    results = {"machine": machine_label(), "dim": args.dim, "k": args.k, "rows": []}
    for size in (int(s) for s in args.sizes.split(",")):
        for factory in args.factories:
            pair = []
            for keep in ("1", "0"):
                cmd = [sys.executable, "-m", "benchmarks.store_memory", "--worker", str(size), factory, keep]
                cmd += ["--k", str(args.k), "--dim", str(args.dim), "--seed", str(args.seed)]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO).stdout
                row = json.loads(out.strip().splitlines()[-1])
                pair.append(row)
                print(
                    f"{size} {factory} keep_vectors={keep == '1'}: {row['rss_bytes_per_view']:.0f} B/view", flush=True
                )
            equal = pair[0]["top10"] == pair[1]["top10"]
            for row in pair:
                row["top10_equal"] = equal
                del row["top10"]
            results["rows"] += pair
            write_results(args.output_dir / "store_memory", results, markdown=render(results))
    print(render(results))


if __name__ == "__main__":
    main()
