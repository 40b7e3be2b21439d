"""Metadata filter evaluation: Haystack's ``document_matches_filter`` per document vs ``compile_filter`` vs the store.

    OMP_NUM_THREADS=1 python -m benchmarks.store_filter_eval            # ~2 min on 2 shared cores
    python -m benchmarks.store_filter_eval --docs 20000 --reps 3      # a quick look

The FAISS store evaluates a filter over every stored document for each filtered search and ``filter_documents``
call. 125,000 seeded documents with realistic meta (``bucket`` int, ``category`` string, ``price`` float, ``date``
ISO day, ``updated`` ISO timestamp (all but unique), ``rating`` present for half of them); each filter is evaluated
over all of them both ways, interleaved (the compiled side includes compiling the filter, as the store does per
call), and by a ``FaissMultiViewDocumentStore`` holding the same documents (``count_documents_by_filter``: its
document table keeps each document as a JSON line and its meta decoded, so a filter on ``meta`` fields reads the
meta and a filter on ``content`` builds every document); medians with the inter-quartile spread; the matched ids
(the store: their count) must be identical.
Writes ``benchmarks/results/store_filter_eval.{json,md}``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import platform
import random
import time
from datetime import date, datetime, timedelta

import numpy as np
from haystack import Document
from haystack.utils.filters import document_matches_filter

from benchmarks.harness import RESULTS, machine_info, write_results
from haystack_mvr.document_stores.compiled_filters import compile_filter

CATEGORIES = [f"cat{i}" for i in range(20)]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def stats(times: list[float]) -> dict[str, float]:
    q = np.percentile(times, [25, 50, 75])
    return {"p50_ms": float(q[1] * 1e3), "p25_ms": float(q[0] * 1e3), "p75_ms": float(q[2] * 1e3), "n": len(times)}


def documents(n: int, seed: int = 0) -> list[Document]:
    rnd = random.Random(seed)
    start, start_ts = date(2020, 1, 1), datetime(2020, 1, 1)
    docs = []
    for i in range(n):
        meta = {
            "bucket": i % 1000,
            "category": rnd.choice(CATEGORIES),
            "price": rnd.random(),
            "date": (start + timedelta(days=rnd.randrange(1000))).isoformat(),
        }
        meta["updated"] = (start_ts + timedelta(seconds=rnd.randrange(10**8))).isoformat()  # all but unique
        if rnd.random() < 0.5:
            meta["rating"] = rnd.random()
        docs.append(Document(id=str(i), content=f"document {i}", meta=meta))
    return docs


def cond(field: str, op: str, value) -> dict:
    return {"field": f"meta.{field}", "operator": op, "value": value}


FILTERS = {
    "equality (int)": cond("bucket", "==", 7),
    "equality (date)": cond("date", "==", "2021-03-04"),
    "range (float)": cond("price", ">=", 0.99),
    "date range": {
        "operator": "AND",
        "conditions": [cond("date", ">=", "2022-01-01"), cond("date", "<", "2022-01-11")],
    },
    "timestamp range (unique values)": {
        "operator": "AND",
        "conditions": [cond("updated", ">=", "2021-01-01T00:00:00"), cond("updated", "<", "2021-01-12T13:46:40")],
    },
    "in (strings)": cond("category", "in", ["cat3", "cat7"]),
    "AND/OR nesting": {
        "operator": "AND",
        "conditions": [
            cond("bucket", "<", 100),
            {"operator": "OR", "conditions": [cond("category", "==", "cat0"), cond("rating", ">=", 0.9)]},
        ],
    },
    "sometimes missing": cond("rating", ">", 0.8),
    "NOT": {"operator": "NOT", "conditions": [cond("category", "not in", CATEGORIES[:2])]},
    "content (not meta: the store builds every document)": {"field": "content", "operator": "==", "value": "x"},
}


def haystack_ids(filters: dict, docs: list[Document]) -> list[str]:
    return [d.id for d in docs if document_matches_filter(filters, d)]


def compiled_ids(filters: dict, docs: list[Document]) -> list[str]:
    match = compile_filter(filters)
    return [d.id for d in docs if match(d)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=125_000)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    log(f"building {args.docs:,} documents")
    docs = documents(args.docs)
    from haystack_mvr.document_stores import FaissMultiViewDocumentStore

    store = FaissMultiViewDocumentStore()
    store.write_documents(docs)
    loads = [os.getloadavg()[0]]
    rows = {}
    for name, filters in FILTERS.items():
        expected = haystack_ids(filters, docs)
        assert compiled_ids(filters, docs) == expected, name
        assert store.count_documents_by_filter(filters) == len(expected), name
        times: dict[str, list[float]] = {"haystack": [], "compiled": [], "store": []}
        for rep in range(args.reps):
            order = [
                ("haystack", haystack_ids),
                ("compiled", compiled_ids),
                ("store", lambda f, _: store.count_documents_by_filter(f)),
            ]
            for side, fn in order if rep % 2 == 0 else order[::-1]:
                t = time.perf_counter()
                fn(filters, docs)
                times[side].append(time.perf_counter() - t)
        loads.append(os.getloadavg()[0])
        row = {
            "filter": filters,
            "matching": len(expected),
            "haystack": stats(times["haystack"]),
            "compiled": stats(times["compiled"]),
            "store": stats(times["store"]),
        }
        row["speedup"] = row["haystack"]["p50_ms"] / row["compiled"]["p50_ms"]
        rows[name] = row
        log(
            f"{name}: {len(expected):,} matching, haystack {row['haystack']['p50_ms']:.1f} ms, "
            f"compiled {row['compiled']['p50_ms']:.1f} ms, {row['speedup']:.1f}x, store {row['store']['p50_ms']:.1f} ms"
        )

    def ms(s: dict) -> str:
        return f"{s['p50_ms']:.1f} ({s['p25_ms']:.1f}-{s['p75_ms']:.1f})"

    lines = [
        "# Metadata filter evaluation: `document_matches_filter` vs `compile_filter` vs the FAISS store",
        "",
        f"{args.docs:,} documents (meta: `bucket` int, `category` one of 20 strings, `price` float, `date` ISO "
        "day out of 1,000, `updated` ISO timestamp (all but unique), `rating` float on half of them); each filter "
        "evaluated over every document, "
        f"{args.reps} interleaved repetitions, one thread. The compiled side includes compiling the filter (the store "
        "compiles once per call); both sides return the same ids for every filter. The store: "
        "`FaissMultiViewDocumentStore.count_documents_by_filter` over the same documents (no vectors), the same count.",
        "",
        f"Machine: {os.cpu_count()} shared cores, Python {platform.python_version()}, 1-minute load average "
        f"{min(loads):.1f}-{max(loads):.1f} during the run (other jobs beside it): compare within a row.",
        "",
        "| filter | matching docs | `document_matches_filter` p50 ms (IQR) | compiled p50 ms (IQR) | speedup "
        "| store p50 ms (IQR) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, row in rows.items():
        share = 100 * row["matching"] / args.docs
        lines.append(
            f"| {name} | {row['matching']:,} ({share:.2g}%) | {ms(row['haystack'])} | {ms(row['compiled'])} "
            f"| {row['speedup']:.1f}x | {ms(row['store'])} |"
        )
    print("\n".join(lines))
    result = {
        "documents": args.docs,
        "reps": args.reps,
        "load_average": loads,
        "rows": rows,
        "machine": machine_info(),
    }
    write_results(RESULTS / "store_filter_eval", result, markdown="\n".join(lines))
    log("wrote store_filter_eval")


if __name__ == "__main__":
    main()
