"""The FAISS store's speed claims, re-measured with every thread pool pinned and the systems interleaved (issue 28).

    python -m benchmarks.store_speed --parts batch io hnsw memory          # ~40 min on the shared 2-core VM
    python -m benchmarks.store_speed --parts batch --views 250000           # a smaller corpus

Every pool is pinned to ``--threads`` (1) before anything runs: FAISS's OpenMP, both OpenBLAS copies (numpy's and
FAISS's) and any other OpenMP runtime, through ``threadpoolctl``; the results file records
``threadpoolctl.threadpool_info()`` as it was during the run. Each round runs every system once, in turn (the order
alternates between rounds), and the ratio is taken per round; the files give the median ratio and its range over
rounds, the machine's 1-minute load average (``os.getloadavg``) at every round, and every parameter that changes a
number (sizes, ``k'``, ``efSearch``, FAISS's BLAS threshold, threads). Synthetic seeded corpus of
``retrieval_speed.py``: d=384 unit vectors, 8 correlated views per document.

Parts (each writes ``benchmarks/results/store_<part>.{json,md}``):

- ``batch``: 64 queries at ``--views`` Flat rows: ``search_batch`` vs 64 ``search`` calls vs the raw batched
  baseline a user would write (``IndexFlatIP.search(Q, k')`` plus a numpy max-by-document collapse), both with
  FAISS's default BLAS threshold and with ``distance_compute_blas_threshold=20`` (FAISS's BLAS path: faster here).
- ``io``: ``save`` vs ``write_index`` + fsync, ``load`` vs ``read_index`` of the same Flat rows, and loads profiled
  against the ``read_index`` call inside them.
- ``hnsw``: one query at a time on ``HNSW32``: the store vs raw ``IndexHNSWFlat`` built from the same rows in one
  ``add`` (plus the collapse), at several ``efSearch``, with both systems' document recall@10 against exact search.
- ``memory``: ``PQ48`` with ``keep_vectors=False`` written with Documents as ``MultiViewDocumentEmbedder`` makes them
  (``attach_views``: ``PackedViews``, view 0 as the embedding, the encoder's name, snippet spans), resident bytes per
  view after ``gc`` (and after ``malloc_trim``, with glibc's free heap), what content and spans cost per view, and the
  same documents made and dropped without a store (the caller's own temporaries), each in a fresh process.
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import dataclasses
import gc
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import faiss
import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from benchmarks.harness import RESULTS, machine_info, write_results
from benchmarks.retrieval_speed import make_corpus, make_queries, rss_gib

DIM, K, SEED, TOP_K = 384, 8, 0, 10


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def pin(threads: int) -> list[dict]:
    """Pin every thread pool of the process (FAISS's OpenMP and BLAS, numpy's BLAS, torch's if loaded)."""
    threadpool_limits(threads)
    faiss.omp_set_num_threads(threads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
    info = threadpool_info()
    wrong = [p for p in info if p["num_threads"] != threads]
    if wrong:
        raise SystemExit(f"thread pools not pinned to {threads}: {wrong}")
    return [{k: p[k] for k in ("user_api", "internal_api", "prefix", "num_threads", "version")} for p in info]


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def rounds(systems: dict, repeats: int, loads: list[float], cpu: dict | None = None) -> dict[str, list[float]]:
    """Seconds of each system per round; the systems in turn, the order reversed every other round (one warm-up).
    ``cpu`` (when given) gets each one's process CPU seconds too (``time.process_time``: with every pool pinned to
    one thread, the time other jobs on a shared machine take from it is left out)."""
    for fn in systems.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in systems}
    if cpu is not None:
        cpu.update({name: [] for name in systems})
    names = list(systems)
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            start, start_cpu = time.perf_counter(), time.process_time()
            systems[name]()
            times[name].append(time.perf_counter() - start)
            if cpu is not None:
                cpu[name].append(time.process_time() - start_cpu)
        loads.append(os.getloadavg()[0])
    return times


def distinct_documents(labels: np.ndarray, top_k: int) -> list[np.ndarray]:
    """The numpy max-by-document collapse a user would write: each row's first ``top_k`` distinct documents."""
    out = []
    for row in labels:
        keys = row[row >= 0] // K
        _, first = np.unique(keys, return_index=True)
        first.sort()
        out.append(keys[first][:top_k])
    return out


def header(title: str, args, loads: list[float], pools: list[dict], extra: str) -> list[str]:
    pool_text = ", ".join(f"{p['prefix']} ({p['internal_api']}) {p['num_threads']}" for p in pools)
    return [
        f"# {title} (issue 28)",
        "",
        f"Machine: {os.cpu_count()} shared cores ({machine_info()['processor']}), other jobs beside the run: 1-minute "
        f"load average {min(loads):.1f}-{max(loads):.1f} across rounds. Thread pools (threadpoolctl): {pool_text}. "
        f"FAISS {faiss.__version__}, numpy {np.__version__}. {extra}",
        "",
    ]


def ratio_line(name: str, values: list[float], target: str) -> str:
    s = spread(values)
    return f"| {name} | **{s['median']:.2f}x** | {s['min']:.2f}-{s['max']:.2f} | {target} |"


def build_store(factory: str, vectors: np.ndarray, **kwargs):
    from haystack import Document

    from haystack_mvr.document_stores import FaissMultiViewDocumentStore
    from haystack_mvr.views import VIEWS_KEY

    store = FaissMultiViewDocumentStore(embedding_dim=DIM, index_factory=factory, search_threads=1, **kwargs)
    n = len(vectors) // K
    for lo in range(0, n, 10_000):
        hi = min(n, lo + 10_000)
        store.write_documents(
            [Document(id=str(i), meta={VIEWS_KEY: vectors[i * K : (i + 1) * K]}) for i in range(lo, hi)]
        )
    return store


# --------------------------------------------------------------------------------------------------- batched search
def part_batch(args, pools) -> None:
    views, k_raw = args.views, TOP_K * K
    vectors = make_corpus(views, K, DIM, SEED)
    queries = make_queries(vectors, 64, SEED)
    store = build_store("Flat", vectors)
    raw = faiss.IndexFlatIP(DIM)
    raw.add(vectors)
    del vectors
    gc.collect()
    default_threshold = faiss.cvar.distance_compute_blas_threshold

    def raw_search(threshold: int):
        faiss.cvar.distance_compute_blas_threshold = threshold
        try:
            _, labels = raw.search(queries, k_raw)
        finally:
            faiss.cvar.distance_compute_blas_threshold = default_threshold
        return distinct_documents(labels, TOP_K)

    systems = {
        "search_batch": lambda: store.search_batch(queries, top_k=TOP_K),
        "64 x search": lambda: [store.search(q, top_k=TOP_K) for q in queries],
        "raw, FAISS defaults": lambda: raw_search(default_threshold),
        "raw, FAISS BLAS path": lambda: raw_search(20),
    }
    loads: list[float] = []
    cpu: dict[str, list[float]] = {}
    log(f"batch: {args.repeats} rounds")
    times = rounds(systems, args.repeats, loads, cpu)
    batch = times["search_batch"]
    ratios = {
        "singles / search_batch": [s / b for s, b in zip(times["64 x search"], batch, strict=True)],
        "raw FAISS defaults / search_batch": [r / b for r, b in zip(times["raw, FAISS defaults"], batch, strict=True)],
        "raw FAISS BLAS / search_batch": [r / b for r, b in zip(times["raw, FAISS BLAS path"], batch, strict=True)],
    }
    cpu_best_raw = [
        min(a, b) / s
        for a, b, s in zip(cpu["raw, FAISS defaults"], cpu["raw, FAISS BLAS path"], cpu["search_batch"], strict=True)
    ]
    cpu_singles = [a / s for a, s in zip(cpu["64 x search"], cpu["search_batch"], strict=True)]
    best_raw = [
        min(a, b) / s
        for a, b, s in zip(times["raw, FAISS defaults"], times["raw, FAISS BLAS path"], batch, strict=True)
    ]
    ours = [[int(d.id) for d in hits] for hits in store.search_batch(queries, top_k=TOP_K)]
    theirs = raw_search(20)
    agree = sum(o == t.tolist() for o, t in zip(ours, theirs, strict=True))
    short = sum(len(t) < TOP_K for t in theirs)
    singles_equal = all(
        [int(d.id) for d in store.search(q, top_k=TOP_K)] == o for q, o in zip(queries[:16], ours, strict=False)
    )
    params = (
        f"`Flat`, {views:,} views ({views // K:,} documents x {K}), d={DIM}, 64 queries, top_k={TOP_K}; raw: "
        f"`IndexFlatIP.search(Q, k'={k_raw})` + a numpy collapse (`np.unique` per query), with FAISS's default "
        f"`distance_compute_blas_threshold` ({default_threshold:,}: 64 queries take its per-query SIMD scan) and "
        "with 20 (its BLAS path); the store searches `2 x top_k x views per document` = "
        f"{2 * TOP_K * K} rows deep. {args.repeats} interleaved rounds, ratio per round."
    )
    lines = header("64 queries: search_batch vs single calls vs the raw batched baseline", args, loads, pools, params)
    lines += ["| system | median ms for 64 queries | range |", "|---|---:|---:|"]
    for name, t in times.items():
        s = spread([x * 1e3 for x in t])
        lines.append(f"| {name} | {s['median']:.0f} | {s['min']:.0f}-{s['max']:.0f} |")
    lines += ["", "| ratio (per round) | median | range | target |", "|---|---:|---:|---|"]
    lines.append(ratio_line("64 single calls / search_batch", ratios["singles / search_batch"], ">= 3x"))
    lines.append(ratio_line("raw with FAISS defaults / search_batch", ratios["raw FAISS defaults / search_batch"], ""))
    lines.append(ratio_line("raw on FAISS's BLAS path / search_batch", ratios["raw FAISS BLAS / search_batch"], ""))
    lines.append(ratio_line("the faster raw / search_batch", best_raw, ">= 0.85x"))
    lines.append(ratio_line("CPU time: 64 single calls / search_batch", cpu_singles, ">= 3x"))
    lines.append(ratio_line("CPU time: the faster raw / search_batch", cpu_best_raw, ">= 0.85x"))
    lines += [
        "",
        f"- search_batch's documents equal the raw baseline's for {agree} of 64 queries ({short} raw collapses of "
        f"k'={k_raw} rows found fewer than {TOP_K} documents; the store widens until it has {TOP_K}); the first 16 "
        f"queries' single-call rankings equal search_batch's: {singles_equal}",
    ]
    result = {
        "views": views,
        "queries": 64,
        "top_k": TOP_K,
        "k_raw": k_raw,
        "store_depth": 2 * TOP_K * K,
        "faiss_default_blas_threshold": int(default_threshold),
        "repeats": args.repeats,
        "seconds": times,
        "cpu_seconds": cpu,
        "cpu_ratios": {"singles / search_batch": cpu_singles, "best raw / search_batch": cpu_best_raw},
        "ratios": {**ratios, "best raw / search_batch": best_raw},
        "ratio_spread": {k: spread(v) for k, v in {**ratios, "best raw / search_batch": best_raw}.items()},
        "agree_with_raw": agree,
        "raw_short": short,
        "load_average": loads,
        "thread_pools": pools,
        "machine": machine_info(),
    }
    write_results(RESULTS / f"store_batch{args.suffix}", result, markdown="\n".join(lines))
    log(f"wrote store_batch{args.suffix}")


# -------------------------------------------------------------------------------------------------------------- I/O
def part_io(args, pools) -> None:
    from haystack_mvr.document_stores import FaissMultiViewDocumentStore

    views = args.views
    vectors = make_corpus(views, K, DIM, SEED)
    store = build_store("Flat", vectors)
    raw = faiss.IndexFlatIP(DIM)
    raw.add(vectors)
    del vectors
    gc.collect()
    names = ("save", "write_index + fsync", "load", "read_index")
    times: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    loads: list[float] = []
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        for r in range(args.repeats + 1):  # round 0 warms the page cache and is not kept
            folder, target = Path(tmp) / f"store{r}", Path(tmp) / f"raw{r}.faiss"

            def raw_write(target=target):
                faiss.write_index(raw, str(target))
                with open(target, "rb") as f:
                    os.fsync(f.fileno())

            got, got_cpu = {}, {}
            pairs = [("save", lambda folder=folder: store.save(folder)), ("write_index + fsync", raw_write)]
            for name, fn in pairs if r % 2 == 0 else pairs[::-1]:
                start, start_cpu = time.perf_counter(), time.process_time()
                fn()
                got[name] = time.perf_counter() - start
                got_cpu[name] = time.process_time() - start_cpu

            def load(folder=folder):
                copy = FaissMultiViewDocumentStore(embedding_dim=DIM)
                copy.load(folder)
                return copy

            pairs = [("load", load), ("read_index", lambda t=target: faiss.read_index(str(t)))]
            got["load"] = got["read_index"] = got_cpu["load"] = got_cpu["read_index"] = 0.0
            # each twice, mirrored (A B B A): on this VM the first 1.5 GB read after a free ran up to 2x slower
            # whichever it was (per-round ratios 0.8x and 3.4x by order alone), so each round holds both orders
            for name, fn in pairs + pairs[::-1] if r % 2 == 0 else pairs[::-1] + pairs:
                start, start_cpu = time.perf_counter(), time.process_time()
                loaded = fn()
                got[name] += time.perf_counter() - start
                got_cpu[name] += time.process_time() - start_cpu
                # freed before the other one runs, untimed: with both 1.5 GB copies alive, whichever ran second
                # paid for fresh memory (2-4x its time here), which the alternating order did not cancel out
                del loaded
                gc.collect()
            for name in ("load", "read_index"):  # one operation's time: the mean of its two runs
                got[name] /= 2
                got_cpu[name] /= 2
            if r == 0:
                disk = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
                raw_bytes = target.stat().st_size
            else:
                for n in names:
                    times[n].append(got[n])
                    cpu[n].append(got_cpu[n])
                loads.append(os.getloadavg()[0])
            shutil.rmtree(folder)
            target.unlink()
            log(f"io round {r}: " + ", ".join(f"{n} {got[n]:.2f} s" for n in names))
        inside = _read_index_inside_load(store, Path(tmp) / "profiled", args.repeats)
    save_ratio = [s / w for s, w in zip(times["save"], times["write_index + fsync"], strict=True)]
    load_ratio = [s / w for s, w in zip(times["load"], times["read_index"], strict=True)]
    cpu_save = [s / w for s, w in zip(cpu["save"], cpu["write_index + fsync"], strict=True)]
    cpu_load = [s / w for s, w in zip(cpu["load"], cpu["read_index"], strict=True)]
    params = (
        f"`Flat`, {views:,} views ({views // K:,} documents x {K}, no content), d={DIM}. Save writes documents.jsonl, "
        "keys, counts and the index (`write_index` itself), checksums each file (XXH3-64) from the page cache, fsyncs "
        "every file and folder and swaps `CURRENT`; raw is `write_index` + fsync of the file. Load verifies every "
        "checksum (the index from a read-only map, then `read_index` itself reads it) and cross-checks the files; raw "
        "is `read_index`. Files in the same folder on the same disk, page cache warm (a first round, not kept, wrote "
        "and read both); each loaded copy is freed (untimed) before the other operation runs; load and read_index run "
        "twice a round, mirrored (A B B A), each timed as the mean of its two runs; "
        f"{args.repeats} interleaved rounds, order alternating, ratio per round."
    )
    lines = header("Saving and loading vs write_index / read_index", args, loads, pools, params)
    lines += ["| operation | median s | range |", "|---|---:|---:|"]
    for n in names:
        s = spread(times[n])
        lines.append(f"| {n} | {s['median']:.2f} | {s['min']:.2f}-{s['max']:.2f} |")
    lines += ["", "| ratio (per round) | median | range | target |", "|---|---:|---:|---|"]
    lines.append(ratio_line("save / (write_index + fsync)", save_ratio, "<= 1.5x"))
    lines.append(ratio_line("load / read_index", load_ratio, "<= 1.5x"))
    lines.append(ratio_line("CPU time: save / (write_index + fsync)", cpu_save, ""))
    lines.append(ratio_line("CPU time: load / read_index", cpu_load, ""))
    in_load = [s / w for s, w in zip(inside["load"], inside["read_index inside it"], strict=True)]
    lines.append(ratio_line("load / the read_index inside it (profiled, see below)", in_load, "<= 1.5x"))
    lines += [
        "",
        f"Profiled: {args.repeats} more loads of one saved copy under `cProfile`, each against the `read_index` call "
        "inside it (FAISS's own reader, timed by the profile in the same call): both see the same memory and disk, "
        "which on this VM made `read_index` alone vary 2-3x between rounds above. Load "
        f"{statistics.median(inside['load']):.2f} s, its read_index "
        f"{statistics.median(inside['read_index inside it']):.2f} s (medians).",
        "",
        f"Bytes on disk: {disk:,} against the raw index file's {raw_bytes:,} ({disk / raw_bytes:.3f}x).",
    ]
    result = {
        "views": views,
        "repeats": args.repeats,
        "seconds": times,
        "cpu_seconds": cpu,
        "ratios": {"save": save_ratio, "load": load_ratio},
        "cpu_ratios": {"save": cpu_save, "load": cpu_load},
        "ratio_spread": {"save": spread(save_ratio), "load": spread(load_ratio)},
        "profiled_load_seconds": inside,
        "profiled_load_ratios": in_load,
        "profiled_load_ratio_spread": spread(in_load),
        "disk_bytes": disk,
        "raw_index_bytes": raw_bytes,
        "load_average": loads,
        "thread_pools": pools,
        "machine": machine_info(),
    }
    write_results(RESULTS / f"store_io{args.suffix}", result, markdown="\n".join(lines))
    log(f"wrote store_io{args.suffix}")


def _read_index_inside_load(store, folder: Path, repeats: int) -> dict[str, list[float]]:
    """Seconds of ``repeats`` loads of ``store`` saved at ``folder``, and of the ``read_index`` inside each (from a
    ``cProfile`` of the load: FAISS's reader is one call, so the profile's own cost is the few thousand others')."""
    from haystack_mvr.document_stores import FaissMultiViewDocumentStore

    store.save(folder)
    out: dict[str, list[float]] = {"load": [], "read_index inside it": []}
    for _ in range(repeats):
        copy = FaissMultiViewDocumentStore(embedding_dim=DIM)
        profile = cProfile.Profile()
        start = time.perf_counter()
        profile.runcall(copy.load, folder)
        out["load"].append(time.perf_counter() - start)
        stats = pstats.Stats(profile).stats
        inner = [v[3] for k, v in stats.items() if k[2] == "read_index" and k[0].endswith("swigfaiss.py")]
        out["read_index inside it"].append(sum(inner))
        del copy
        gc.collect()
    log(
        f"io profiled: load {statistics.median(out['load']):.2f} s, read_index inside it "
        f"{statistics.median(out['read_index inside it']):.2f} s"
    )
    return out


# ------------------------------------------------------------------------------------------------------------- HNSW
def part_hnsw(args, pools) -> None:
    from haystack_mvr.document_stores.faiss.view_labels import VIEW_BITS

    views = args.hnsw_views
    vectors = make_corpus(views, K, DIM, SEED)
    queries = make_queries(vectors, args.queries, SEED)
    exact = faiss.IndexFlatIP(DIM)
    exact.add(vectors)
    _, rows = exact.search(queries, 100 * K)
    truth = [set(t.tolist()) for t in distinct_documents(rows, TOP_K)]
    del exact
    log("hnsw: building the store")
    store = build_store("HNSW32", vectors, search_parameters={"efSearch": 16})
    log("hnsw: building raw IndexHNSWFlat (one add)")
    raw = faiss.IndexHNSWFlat(DIM, 32, faiss.METRIC_INNER_PRODUCT)
    raw.add(vectors)
    del vectors
    gc.collect()
    graph = store.faiss_index  # the store's own IndexIDMap2 over its HNSW graph
    inner = faiss.downcast_index(graph.index)
    k_raw = TOP_K * K

    def raw_one(q):
        _, labels = raw.search(q[None], k_raw)
        return distinct_documents(labels, TOP_K)[0]

    def same_graph_one(q):  # raw FAISS on the store's graph: the same rows visited, so the same recall
        _, labels = graph.search(q[None], k_raw)
        return distinct_documents(np.where(labels >= 0, (labels >> VIEW_BITS) * K, -1), TOP_K)[0]  # store keys

    document_of_key = {key: int(doc_id) for key, doc_id in store._id_of.items()}

    def recall(found) -> float:
        return statistics.mean(len(set(map(int, f)) & t) / TOP_K for f, t in zip(found, truth, strict=True))

    rows_out = []
    loads: list[float] = []
    for ef in args.ef:
        inner.hnsw.efSearch = ef
        raw.hnsw.efSearch = ef
        store_recall = recall([[int(d.id) for d in store.search(q, top_k=TOP_K)] for q in queries])
        raw_recall = recall([raw_one(q) for q in queries])
        same_recall = recall([[document_of_key[int(k)] for k in same_graph_one(q)] for q in queries])
        systems = {
            "store": lambda: [store.search(q, top_k=TOP_K) for q in queries],
            "raw": lambda: [raw_one(q) for q in queries],
            "same graph": lambda: [same_graph_one(q) for q in queries],
        }
        cpu: dict[str, list[float]] = {}
        times = rounds(systems, args.repeats, loads, cpu)

        def per_round(base: str, clock: dict) -> list[float]:
            return [s / r for s, r in zip(clock["store"], clock[base], strict=True)]

        per_query = {n: [t / len(queries) * 1e3 for t in v] for n, v in times.items()}
        rows_out.append(
            {
                "efSearch": ef,
                "store_ms_per_query": spread(per_query["store"]),
                "raw_ms_per_query": spread(per_query["raw"]),
                "same_graph_ms_per_query": spread(per_query["same graph"]),
                "ratio": spread(per_round("raw", times)),
                "ratios": per_round("raw", times),
                "cpu_ratio": spread(per_round("raw", cpu)),
                "cpu_ratios": per_round("raw", cpu),
                "same_graph_ratio": spread(per_round("same graph", times)),
                "same_graph_ratios": per_round("same graph", times),
                "same_graph_cpu_ratio": spread(per_round("same graph", cpu)),
                "store_recall_at_10": store_recall,
                "raw_recall_at_10": raw_recall,
                "same_graph_recall_at_10": same_recall,
            }
        )
        log(
            f"  efSearch {ef}: ratio {rows_out[-1]['ratio']['median']:.2f} raw, "
            f"{rows_out[-1]['same_graph_ratio']['median']:.2f} same graph; recall {store_recall:.3f} / "
            f"{raw_recall:.3f} / {same_recall:.3f}"
        )
    params = (
        f"`HNSW32` (M=32, efConstruction 40, FAISS's default), {views:,} views ({views // K:,} documents x {K}), "
        f"d={DIM}, {args.queries} queries one at a time, top_k={TOP_K}. The store: `search` (built by "
        "`write_documents` of 10,000 documents at a time; on HNSW its first depth is `top_k x views per document` = "
        f"{TOP_K * K} rows, like raw's k', so FAISS searches max(efSearch, {TOP_K * K}) deep either way), returning "
        "Documents with the matched view. Raw: `IndexHNSWFlat` over the same rows built in one `add`, "
        f"`search(q, k'={k_raw})` + the numpy collapse. "
        "Same graph: the store's own `IndexIDMap2` over its HNSW graph searched by FAISS directly, plus the same "
        "collapse: the rows FAISS visits are the store's, so recall is equal by construction and the ratio is what the "
        "store adds (the separately built graph's recall differs from the store's by its construction alone). "
        "Recall@10: documents found among the exact top-10 documents (max over views, `IndexFlatIP`). "
        f"{args.repeats} interleaved rounds, ratio per round (each round: every query once)."
    )
    lines = header("HNSW32, one query at a time: the store vs raw IndexHNSWFlat", args, loads, pools, params)
    lines += [
        "| efSearch | store ms/query (range) | raw ms/query (range) | store / raw (range) | CPU time: store / raw "
        "(range) | same graph ms/query | store / same graph (range) | CPU time: store / same graph | "
        "recall@10 store | recall@10 raw | recall@10 same graph |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def cell(v: dict, digits: int = 2, unit: str = "x") -> str:
        return f"{v['median']:.{digits}f}{unit} ({v['min']:.{digits}f}-{v['max']:.{digits}f})"

    for r in rows_out:
        lines.append(
            f"| {r['efSearch']} | {cell(r['store_ms_per_query'], 3, '')} | {cell(r['raw_ms_per_query'], 3, '')} | "
            f"**{cell(r['ratio'])}** | {cell(r['cpu_ratio'])} | {cell(r['same_graph_ms_per_query'], 3, '')} | "
            f"**{cell(r['same_graph_ratio'])}** | {cell(r['same_graph_cpu_ratio'])} | "
            f"{r['store_recall_at_10']:.3f} | {r['raw_recall_at_10']:.3f} | {r['same_graph_recall_at_10']:.3f} |"
        )
    result = {
        "views": views,
        "queries": args.queries,
        "top_k": TOP_K,
        "k_raw": k_raw,
        "store_depth": TOP_K * K,
        "repeats": args.repeats,
        "rows": rows_out,
        "load_average": loads,
        "thread_pools": pools,
        "machine": machine_info(),
    }
    write_results(RESULTS / f"store_hnsw{args.suffix}", result, markdown="\n".join(lines))
    log(f"wrote store_hnsw{args.suffix}")


# ----------------------------------------------------------------------------------------------------------- memory
class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks")
    ] + [("keepcost", ctypes.c_size_t)]


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


def _malloc_trim() -> bool:
    libc = _libc()
    return bool(libc is not None and libc.malloc_trim(0))


def _free_heap_bytes() -> int | None:
    """glibc's free bytes inside its heaps (``mallinfo2().fordblks``): freed memory not yet given back."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mallinfo2"):
        return None
    libc.mallinfo2.restype = _MallInfo2
    return int(libc.mallinfo2().fordblks)


#: The memory rows: (name, spans and content, view 0 as the embedding, written to a store).
MEMORY_ROWS = (
    ("views only", False, True, True),
    ("with spans and content", True, True, True),
    ("views only, embedding=None", False, False, True),
    ("the same documents, no store", False, True, False),
)


def memory_worker(views: int, spans: bool, first_view: bool = True, store_them: bool = True, batch: int = 10_000):
    from haystack import Document

    from haystack_mvr.document_stores import FaissMultiViewDocumentStore
    from haystack_mvr.views import ENCODER_KEY, attach_views

    gc.collect()
    base = rss_gib() * 2**30
    store = FaissMultiViewDocumentStore(embedding_dim=DIM, index_factory="PQ48", keep_vectors=False, train_size=20_000)
    encoder = {"model": "benchmark", "mode": "snippet", "views": K}
    n = views // K
    for lo in range(0, n, batch):  # as the embedder hands them on, one batch at a time
        hi = min(n, lo + batch)
        vectors = make_corpus((hi - lo) * K, K, DIM, SEED + lo)
        docs = []
        for i in range(hi - lo):
            content = "x" * 40 * K if spans else None
            doc = attach_views(
                Document(id=str(lo + i), content=content),
                vectors[i * K : (i + 1) * K],
                [(j * 40, j * 40 + 39) for j in range(K)] if spans else None,
            )
            doc.meta[ENCODER_KEY] = dict(encoder)
            if not first_view:  # the same documents without view 0 as an embedding (384 Python floats each)
                doc = dataclasses.replace(doc, embedding=None)
            docs.append(doc)
        if store_them:
            store.write_documents(docs)
        del docs, vectors
    gc.collect()
    rss = rss_gib() * 2**30 - base
    free_heap = _free_heap_bytes()
    trimmed = _malloc_trim()
    rss_trim = rss_gib() * 2**30 - base
    index = store.faiss_index
    index_bytes = len(faiss.serialize_index(index)) if index is not None else 0
    content_bytes = (40 * K * n) if spans and store_them else 0
    return {
        "views": views,
        "spans": spans,
        "first_view": first_view,
        "store": store_them,
        "write_batch": batch,
        "resident_bytes_per_view_after_gc": rss / views,
        "resident_bytes_per_view_after_malloc_trim": rss_trim / views if trimmed else None,
        "free_heap_bytes_per_view_after_gc": None if free_heap is None else free_heap / views,
        "index_bytes_per_view": index_bytes / views,
        "content_bytes_per_view": content_bytes / views,
    }


def part_memory(args, pools) -> None:
    rows = []
    for name, spans, first_view, store_them in MEMORY_ROWS:
        cmd = [sys.executable, "-m", "benchmarks.store_speed", "--memory-worker", str(args.memory_views)]
        cmd += ["--threads", str(args.threads), "--memory-batch", str(args.memory_batch)]
        cmd += (["--spans"] if spans else []) + ([] if first_view else ["--no-first-view"])
        cmd += [] if store_them else ["--no-store"]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        rows.append({"name": name, **json.loads(out.strip().splitlines()[-1])})
        log(f"memory: {rows[-1]}")
    loads = [os.getloadavg()[0]]
    by_name = {r["name"]: r for r in rows}
    views_only, with_spans = by_name["views only"], by_name["with spans and content"]
    spans_cost = {
        key: with_spans[key] - views_only[key]
        for key in ("resident_bytes_per_view_after_gc", "resident_bytes_per_view_after_malloc_trim")
        if with_spans[key] is not None and views_only[key] is not None
    }
    params = (
        f"`PQ48`, `keep_vectors=False`, train_size 20,000, {args.memory_views:,} views ({args.memory_views // K:,} "
        f"documents x {K}), d={DIM}, written {args.memory_batch:,} documents at a time as `MultiViewDocumentEmbedder` "
        "hands them on (`attach_views`: `PackedViews` in meta, view 0 as a `list[float]` embedding, the encoder's name "
        f"in meta; with spans: {K} snippet spans and a {40 * K}-character content per document). Each row is a fresh "
        "process; resident = process memory after the build and `gc.collect()` minus before it, per view (documents, "
        "row maps, PQ codes, content); free heap = glibc's freed bytes not given back (`mallinfo2().fordblks`). "
        "The last row makes and drops the same documents without a store: what the caller's temporaries leave."
    )
    lines = header("PQ48 without float32 rows: memory on the embedders' own output", args, loads, pools, params)
    lines += [
        "| documents | resident B/view after gc | after malloc_trim | glibc free heap after gc | of which PQ index "
        "| of which content | target |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        trim, free = r["resident_bytes_per_view_after_malloc_trim"], r["free_heap_bytes_per_view_after_gc"]
        lines.append(
            f"| {r['name']} | **{r['resident_bytes_per_view_after_gc']:.0f}** | "
            f"{'-' if trim is None else f'{trim:.0f}'} | {'-' if free is None else f'{free:.0f}'} | "
            f"{r['index_bytes_per_view']:.1f} | {r['content_bytes_per_view']:.0f} | "
            f"{'<= 250' if r['store'] else '-'} |"
        )
    alone = by_name["the same documents, no store"]["resident_bytes_per_view_after_gc"]
    lines += [
        "",
        "The store's share after gc (resident with the store minus the same documents written nowhere, which leaves "
        "the caller's freed temporaries in glibc's heap either way): "
        + ", ".join(
            f"{r['name']} {r['resident_bytes_per_view_after_gc'] - alone:+.0f} B/view" for r in rows if r["store"]
        )
        + ".",
    ]
    if spans_cost:
        lines += [
            "",
            "What content and spans cost per view (with spans and content minus views only): "
            + ", ".join(f"{v:+.0f} B {k.removeprefix('resident_bytes_per_view_')}" for k, v in spans_cost.items())
            + f" (of which the content itself {with_spans['content_bytes_per_view']:.0f} B).",
        ]
    result = {
        "rows": rows,
        "spans_and_content_bytes_per_view": spans_cost,
        "store_share_bytes_per_view_after_gc": {
            r["name"]: r["resident_bytes_per_view_after_gc"] - alone for r in rows if r["store"]
        },
        "thread_pools": pools,
        "machine": machine_info(),
        "load_average": loads,
    }
    write_results(RESULTS / f"store_memory_embedded{args.suffix}", result, markdown="\n".join(lines))
    log(f"wrote store_memory_embedded{args.suffix}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", nargs="+", default=["batch", "io", "hnsw", "memory"])
    parser.add_argument("--views", type=int, default=1_000_000, help="batch and io: Flat rows")
    parser.add_argument("--hnsw-views", type=int, default=250_000)
    parser.add_argument("--memory-views", type=int, default=1_000_000)
    parser.add_argument("--memory-batch", type=int, default=10_000, help="memory: documents per write")
    parser.add_argument("--ef", type=int, nargs="+", default=[16, 64, 128], help="hnsw: efSearch values")
    parser.add_argument("--queries", type=int, default=100, help="hnsw: queries per round")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tmp", default=None, help="io: folder for the saved copies")
    parser.add_argument("--suffix", default="", help="results file store_<part><suffix>")
    parser.add_argument("--memory-worker", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--spans", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-first-view", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-store", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    pools = pin(args.threads)
    if args.memory_worker:
        worker = memory_worker(
            args.memory_worker, args.spans, not args.no_first_view, not args.no_store, args.memory_batch
        )
        print(json.dumps(worker))
        return
    for part in args.parts:
        log(f"part {part}")
        globals()[f"part_{part}"](args, pools)


if __name__ == "__main__":
    main()
