"""Issue 13: a streaming build of FaissMultiViewDocumentStore at 10^7 views with ``OPQ48,PQ48``, ``keep_vectors=False``.

    nice -n 5 python -m benchmarks.store_streaming_build --views 100000 --checkpoints ""   # smoke test, ~5 min
    nice -n 5 python -m benchmarks.store_streaming_build    # 10^7 views: 1.25M documents x 8, ~25 min on 2 loaded cores

The defaults are the settings of ``results/store_streaming_build_np.md`` (written with ``--tag np``):
``--factory OPQ48,PQ48np`` (FAISS's ``PQ48`` adds polysemous training, a relabelling of the codes that ADC search
never uses and that took 567 s against 8 s without it here), ``--train-size 16384``, ``--chunk-docs 12500``, every
core for writes and training (``--threads 0``), mid-build measurements at 10^5 and 10^6 views. The headline
``results/store_streaming_build.md`` is the issue's factory: ``--factory OPQ48,PQ48 --checkpoints "" --no-batch
--no-save``.

The corpus is generated chunk by chunk (``--chunk-docs`` documents at a time) and each chunk is written through
``store.write_documents`` as Haystack Documents carrying their views as a numpy array in ``meta`` (what the
embedders produce), so the float32 corpus (15 GB at 10^7 x 384) never exists in the process. The generator is
``retrieval_speed.py``'s (1000 topics, a document centre around one topic, 8 correlated views around the centre,
unit vectors), with the topics drawn once and each chunk from its own seeded stream, so every chunk shares the
same cluster structure and a chunk can be regenerated alone.

The store is ``FaissMultiViewDocumentStore(embedding_dim=384, index_factory=--factory, keep_vectors=False,
train_size=--train-size)``: the first ``train_size`` rows are staged, the index is trained once on them, then every
later chunk is encoded into it and no float32 row is kept. Writes and training use the store's default FAISS
threads (every core); ``OMP_NUM_THREADS``/BLAS are pinned to 1 at process start and searches run with
``search_threads=1``.

Measured: training time (the ``write_documents`` call that reached ``train_size``), store write time and whole build
wall time; peak resident memory (``ru_maxrss``, and ``VmRSS`` sampled every 0.2 s by a thread, so the peak of each
phase is known); resident bytes per view after the build (VmRSS after minus before the first chunk, over the views);
float32 rows still held by the store; the FAISS index's serialized bytes; p50/p90 single-query latency over
``--queries`` queries (top_k=10) and batch-64 throughput; recall@10 of the returned documents against the exact
max-over-views top-10 (computed chunk by chunk from the same float32 rows during the build, outside the timed
writes); optionally ``save`` and ``load`` time and bytes on disk. Queries are stored views of documents drawn across
the whole corpus, plus noise (``retrieval_speed.make_queries``'s noise).

Writes ``benchmarks/results/store_streaming_build.{json,md}`` (``--tag`` adds a suffix) after the build and again at
the end, so an interrupted run keeps what it measured.
"""

from __future__ import annotations

import os

from benchmarks.harness import pin_threads

pin_threads(fixed=1)  # before numpy and FAISS are imported
# threads that wait at an OpenMP barrier sleep instead of spinning (spinning starves a co-worker on a loaded machine)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import gc  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from benchmarks.harness import RESULTS, machine_info  # noqa: E402
from benchmarks.harness import write_results as write_harness_results  # noqa: E402
from benchmarks.retrieval_speed import DOC_SPREAD, N_TOPICS, QUERY_SPREAD, VIEW_SPREAD, _normalize  # noqa: E402

FACTORY = "OPQ48,PQ48"  # the issue's; the default --factory adds "np": no polysemous training (same codes, relabelled)
TOP_K = 10


def log(msg: str) -> None:
    print(f"[{datetime.now(UTC).strftime('%H:%M:%S')}Z] {msg}", flush=True)


def status_kib(field: str) -> int:
    with open("/proc/self/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def rss_bytes() -> int:
    return status_kib("VmRSS") * 1024


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


class Sampler(threading.Thread):
    """VmRSS every ``period`` seconds; ``mark(name)`` closes a phase and records its peak."""

    def __init__(self, period: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.period = period
        self.peak = 0
        self.phase_peak = 0
        self.phases: dict[str, int] = {}
        self._stop = threading.Event()

    def run(self) -> None:
        while not self._stop.is_set():
            self.observe()
            time.sleep(self.period)

    def observe(self) -> None:
        r = rss_bytes()
        self.peak = max(self.peak, r)
        self.phase_peak = max(self.phase_peak, r)

    def mark(self, name: str) -> int:
        self.observe()
        peak, self.phase_peak = self.phase_peak, 0
        self.phases[name] = peak
        return peak

    def stop(self) -> None:
        self._stop.set()


# ------------------------------------------------------------------------------------------------ data
class ChunkedCorpus:
    """``retrieval_speed.make_corpus``'s distribution, one chunk of documents at a time, each chunk reproducible."""

    def __init__(self, n_docs: int, k: int, dim: int, seed: int, chunk_docs: int) -> None:
        self.n_docs, self.k, self.dim, self.seed, self.chunk_docs = n_docs, k, dim, seed, chunk_docs
        rng = np.random.default_rng(seed)
        self.topics = _normalize(rng.standard_normal((N_TOPICS, dim), dtype=np.float32))

    @property
    def n_chunks(self) -> int:
        return -(-self.n_docs // self.chunk_docs)

    def chunk(self, c: int) -> np.ndarray:
        """Rows of documents ``[c * chunk_docs, ...)``: ``(docs * k, dim)`` float32, row-major by document."""
        start = c * self.chunk_docs
        n = min(self.n_docs, start + self.chunk_docs) - start
        rng = np.random.default_rng([self.seed, 1, c])
        centres = self.topics[rng.integers(0, N_TOPICS, n)]
        centres += rng.standard_normal(centres.shape, dtype=np.float32) * np.float32(DOC_SPREAD / np.sqrt(self.dim))
        _normalize(centres)
        views = np.repeat(centres, self.k, axis=0)
        views += rng.standard_normal(views.shape, dtype=np.float32) * np.float32(VIEW_SPREAD / np.sqrt(self.dim))
        return _normalize(views)


def make_queries(corpus: ChunkedCorpus, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` queries: a stored view of a document drawn across the whole corpus, plus noise; and those documents."""
    rng = np.random.default_rng([seed, 2])
    docs = np.sort(rng.choice(corpus.n_docs, size=n, replace=False))
    rows = []
    for c in np.unique(docs // corpus.chunk_docs):
        block = corpus.chunk(int(c))
        for d in docs[docs // corpus.chunk_docs == c]:
            local = int(d) - int(c) * corpus.chunk_docs
            rows.append(block[local * corpus.k + int(rng.integers(0, corpus.k))].copy())  # not a view: frees block
        del block
    q = np.stack(rows).astype(np.float32)
    q += rng.standard_normal(q.shape, dtype=np.float32) * np.float32(QUERY_SPREAD / np.sqrt(q.shape[1]))
    order = rng.permutation(n)  # not sorted by document
    return np.ascontiguousarray(_normalize(q)[order]), docs[order]


class ExactTopK:
    """The exact max-over-views top-k documents of each query, accumulated chunk by chunk."""

    def __init__(self, queries: np.ndarray, k_views: int, top_k: int) -> None:
        self.queries, self.k_views, self.top_k = queries, k_views, top_k
        self.scores = np.full((len(queries), 0), -np.inf, dtype=np.float32)
        self.docs = np.zeros((len(queries), 0), dtype=np.int64)

    def add(self, rows: np.ndarray, first_doc: int) -> None:
        s = (self.queries @ rows.T).reshape(len(self.queries), -1, self.k_views).max(axis=2)
        take = min(self.top_k, s.shape[1])
        part = np.argpartition(-s, take - 1, axis=1)[:, :take]
        scores = np.concatenate([self.scores, np.take_along_axis(s, part, 1)], axis=1)
        docs = np.concatenate([self.docs, part + first_doc], axis=1)
        keep = np.argsort(-scores, axis=1, kind="stable")[:, : self.top_k]
        self.scores, self.docs = np.take_along_axis(scores, keep, 1), np.take_along_axis(docs, keep, 1)


def directory_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def machine() -> dict:
    info = {
        **machine_info(),
        "mem_total_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return info


# ----------------------------------------------------------------------------------------------- benchmark
def run(args) -> dict:
    import faiss
    from haystack import Document
    from threadpoolctl import threadpool_limits

    from haystack_mvr.document_stores import FaissMultiViewDocumentStore
    from haystack_mvr.views import VIEWS_KEY

    k, dim = args.k, args.dim
    n_docs = args.views // k
    views_total = n_docs * k
    corpus = ChunkedCorpus(n_docs, k, dim, args.seed, args.chunk_docs)
    result: dict = {
        "issue": 13,
        "started_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "settings": {
            "views": views_total,
            "documents": n_docs,
            "views_per_document": k,
            "dim": dim,
            "index_factory": args.factory,
            "keep_vectors": False,
            "train_size": args.train_size,
            "chunk_documents": args.chunk_docs,
            "seed": args.seed,
            "queries": args.queries,
            "top_k": TOP_K,
            "build_threads": args.threads or os.cpu_count(),
            "search_threads": 1,
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
            "env": {v: os.environ.get(v) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")},
            "faiss": faiss.__version__,
            "numpy": np.__version__,
            "nice": os.nice(0),
        },
        "loadavg_start": loadavg(),
        "notes": list(args.note),
    }
    log(
        f"start: {views_total:,} views ({n_docs:,} docs x {k}), d={dim}, {args.factory}, "
        f"train_size={args.train_size:,}, "
        f"load {result['loadavg_start']}"
    )

    t = time.perf_counter()
    queries, query_docs = make_queries(corpus, args.queries + args.warmup, args.seed)
    result["query_generation_s"] = time.perf_counter() - t
    exact = ExactTopK(queries, k, TOP_K)

    sampler = Sampler()
    sampler.start()
    gc.collect()
    base_rss = rss_bytes()
    base_hwm = status_kib("VmHWM") * 1024
    sampler.mark("before")
    log(f"baseline rss {base_rss / 2**30:.2f} GiB (hwm {base_hwm / 2**30:.2f})")

    store = FaissMultiViewDocumentStore(
        embedding_dim=dim,
        index_factory=args.factory,
        keep_vectors=False,
        train_size=args.train_size,
        search_threads=args.threads,  # also the FAISS threads of writes and training (None: every core)
    )
    checkpoints = sorted(int(x) for x in args.checkpoints.split(",") if x)
    gen_s = docs_s = write_s = exact_s = 0.0
    train_s = None
    train_call = None
    progress = []
    t_build = time.perf_counter()
    for c in range(corpus.n_chunks):
        t0 = time.perf_counter()
        rows = corpus.chunk(c)
        t1 = time.perf_counter()
        first = c * args.chunk_docs
        docs = [Document(id=str(first + i), meta={VIEWS_KEY: rows[i * k : (i + 1) * k]}) for i in range(len(rows) // k)]
        t2 = time.perf_counter()
        was_trained = store.stats().trained
        if not was_trained:  # the write that trains gets exactly train_size rows (the store trains on all it staged)
            staged = store.stats().views
            need = max(0, -(-(args.train_size - staged) // k))
            if 0 < need < len(docs):
                store.write_documents(docs[:need])
                docs = docs[need:]
        t_last = time.perf_counter()
        if not was_trained and store.stats().trained:
            train_s, train_call = t_last - t2, c
            was_trained = True
        store.write_documents(docs)
        t3 = time.perf_counter()
        if not was_trained and store.stats().trained:
            train_s, train_call = t3 - t_last, c
        if train_call == c and "after_training" not in result:
            result["after_training"] = {
                "rss_bytes": rss_bytes(),
                "phase_peak_rss_bytes": sampler.mark("staging_and_training"),
                "views_written": min(n_docs, first + args.chunk_docs) * k,
                "write_call_with_training_s": train_s,
            }
            log(f"trained in the write of chunk {c} ({train_s:.1f} s), rss {rss_bytes() / 2**30:.2f} GiB")
        exact.add(rows, first)
        t4 = time.perf_counter()
        del docs, rows
        gen_s += t1 - t0
        docs_s += t2 - t1
        write_s += t3 - t2
        exact_s += t4 - t3
        done = min(n_docs, first + args.chunk_docs) * k
        if checkpoints and done >= checkpoints[0] and done < views_total:
            checkpoints.pop(0)
            t5 = time.perf_counter()
            gc.collect()
            point = {
                "views": done,
                "build_elapsed_s": t4 - t_build,
                "write_documents_s": write_s,
                "rss_bytes": rss_bytes(),
                "resident_bytes_per_view": (rss_bytes() - base_rss) / done,
                "peak_rss_bytes_ru_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                "search": measure_search(store, queries, query_docs, exact, args.warmup, args.checkpoint_queries),
            }
            store.search_threads = args.threads  # also the threads of the writes that follow
            result.setdefault("checkpoints", []).append(point)
            log(
                f"checkpoint {done:,} views: resident {point['resident_bytes_per_view']:.0f} B/view, "
                f"p50 {point['search']['p50_ms']:.1f} ms, recall@10 {point['search']['recall_at_10_vs_exact']:.3f}"
            )
            write_results(result, args, partial=True)
            t_build += time.perf_counter() - t5  # the checkpoint is not build time
        if c % args.log_every == 0 or c == corpus.n_chunks - 1:
            elapsed = time.perf_counter() - t_build
            point = {
                "views": done,
                "elapsed_s": round(elapsed, 1),
                "rss_gib": round(rss_bytes() / 2**30, 3),
                "peak_gib": round(sampler.peak / 2**30, 3),
                "loadavg": loadavg(),
            }
            progress.append(point)
            rate = done / elapsed
            eta = (views_total - done) / rate
            log(
                f"{done:>11,} views  {elapsed:7.0f} s  rss {point['rss_gib']:.2f} GiB  "
                f"peak {point['peak_gib']:.2f} GiB  "
                f"{rate:,.0f} views/s  eta {eta:.0f} s  load {point['loadavg']}"
            )
    build_s = time.perf_counter() - t_build
    build_peak_phase = sampler.mark("writing_after_training")
    gc.collect()
    held = store.stats().kept_vector_bytes
    rss_after = rss_bytes()
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    sampled_peak = sampler.peak  # before serializing the index below (two transient copies of it)
    t = time.perf_counter()
    index_bytes = len(faiss.serialize_index(store.faiss_index))
    serialize_s = time.perf_counter() - t
    gc.collect()
    result["build"] = {
        "wall_s": build_s,
        "generate_s": gen_s,
        "make_documents_s": docs_s,
        "write_documents_s": write_s,
        "exact_reference_s": exact_s,
        "training_write_call_s": train_s,
        "trained_at_chunk": train_call,
        "train_rows": store.stats().train_size,
        "index_ntotal": int(store.faiss_index.ntotal),
        "documents": store.count_documents(),
        "float32_rows_held_bytes": held,
        "baseline_rss_bytes": base_rss,
        "rss_after_bytes": rss_after,
        "resident_bytes_per_view": (rss_after - base_rss) / views_total,
        "peak_rss_bytes_ru_maxrss": peak_rss,
        "peak_rss_bytes_sampled": sampled_peak,
        "peak_growth_bytes_per_view": (peak_rss - base_rss) / views_total,
        "phase_peaks_bytes": dict(sampler.phases),
        "writing_phase_peak_bytes": build_peak_phase,
        "index_serialized_bytes": index_bytes,
        "index_serialized_bytes_per_view": index_bytes / views_total,
        "serialize_s": serialize_s,
        "views_per_s": views_total / build_s,
        "store_views_per_s": views_total / write_s,
        "progress": progress,
        "loadavg_end": loadavg(),
    }
    log(
        f"built in {build_s:.0f} s (store writes {write_s:.0f} s, generation {gen_s:.0f} s, "
        f"exact ref {exact_s:.0f} s); "
        f"resident {(rss_after - base_rss) / views_total:.0f} B/view; peak {peak_rss / 2**30:.2f} GiB; "
        f"index {index_bytes / views_total:.1f} B/view serialized; float32 held {held} B"
    )
    write_results(result, args)

    # ------------------------------------------------------------------------------------------- searches
    result["search"] = measure_search(store, queries, query_docs, exact, args.warmup)
    recall = result["search"]["recall_at_10_vs_exact"]
    log(
        f"search (1 thread): p50 {result['search']['p50_ms']:.1f} ms, p90 {result['search']['p90_ms']:.1f} ms, "
        f"recall@10 vs exact {recall:.3f}"
    )
    write_results(result, args)

    if args.batch:
        batch = queries[args.warmup :][:64]
        if len(batch) < 64:
            batch = np.concatenate([batch] * (-(-64 // len(batch))))[:64]
        threads = os.cpu_count() or 1
        with threadpool_limits(1):
            store.search_threads = None  # search_batch's default: every core
            store.search_batch(batch[:4], top_k=TOP_K)
            reps = []
            for _ in range(args.batch_repeats):
                t = time.perf_counter()
                store.search_batch(batch, top_k=TOP_K)
                reps.append(time.perf_counter() - t)
            store.search_threads = 1
        result["batch64"] = {
            "faiss_threads": threads,
            "repeats": len(reps),
            "median_s": float(np.median(reps)),
            "queries_per_s": 64 / float(np.median(reps)),
            "times_s": [round(x, 3) for x in reps],
            "loadavg": loadavg(),
        }
        log(
            f"batch-64 ({threads} threads): {result['batch64']['median_s']:.2f} s, "
            f"{result['batch64']['queries_per_s']:.1f} q/s"
        )
        write_results(result, args)

    if args.save:
        root = Path(tempfile.mkdtemp(prefix="mvr-stream-", dir=args.tmp))
        try:
            path = root / "store"
            t = time.perf_counter()
            store.save(path)
            save_s = time.perf_counter() - t
            disk = directory_bytes(path)
            files = {str(p.relative_to(path)): p.stat().st_size for p in path.rglob("*") if p.is_file()}
            log(f"saved in {save_s:.1f} s, {disk / views_total:.1f} B/view on disk")
            check = [int(d.id) for d in store.search(queries[args.warmup], top_k=TOP_K)]
            del store
            gc.collect()
            rss_before_load = rss_bytes()
            sampler.mark("search_and_save")
            t = time.perf_counter()
            loaded = FaissMultiViewDocumentStore(embedding_dim=dim, index_factory=args.factory, keep_vectors=False)
            loaded.load(path)
            load_s = time.perf_counter() - t
            load_peak = sampler.mark("load")
            same = [int(d.id) for d in loaded.search(queries[args.warmup], top_k=TOP_K)] == check
            result["persistence"] = {
                "save_s": save_s,
                "load_s": load_s,
                "disk_bytes": disk,
                "disk_bytes_per_view": disk / views_total,
                "files": files,
                "rss_before_load_bytes": rss_before_load,
                "rss_after_load_bytes": rss_bytes(),
                "load_phase_peak_bytes": load_peak,
                "loaded_same_top10": same,
            }
            log(f"loaded in {load_s:.1f} s (same top-10: {same})")
        finally:
            shutil.rmtree(root, ignore_errors=True)
    sampler.stop()
    result["finished_utc"] = datetime.now(UTC).isoformat(timespec="seconds")
    result["loadavg_end"] = loadavg()
    write_results(result, args)
    return result


def measure_search(store, queries, query_docs, exact, warmup: int, limit: int | None = None) -> dict:
    """Single-query latency with 1 FAISS thread (and 1 BLAS thread), recall@10 against the exact top-10 so far."""
    import faiss
    from threadpoolctl import threadpool_limits

    store.search_threads = 1
    faiss.omp_set_num_threads(1)
    measured = queries[warmup:] if limit is None else queries[warmup : warmup + limit]
    with threadpool_limits(1):
        for q in queries[:warmup]:
            store.search(q, top_k=TOP_K)
        times, found = [], []
        for q in measured:
            t = time.perf_counter()
            docs = store.search(q, top_k=TOP_K)
            times.append(time.perf_counter() - t)
            found.append([int(d.id) for d in docs])
    ms = np.asarray(times) * 1e3
    exact_docs = [e.tolist() for e in exact.docs[warmup : warmup + len(measured)]]
    sources = query_docs[warmup : warmup + len(measured)].tolist()
    return {
        "queries": len(times),
        "warmup": warmup,
        "p50_ms": float(np.percentile(ms, 50)),
        "p90_ms": float(np.percentile(ms, 90)),
        "p25_ms": float(np.percentile(ms, 25)),
        "p75_ms": float(np.percentile(ms, 75)),
        "min_ms": float(ms.min()),
        "max_ms": float(ms.max()),
        "mean_ms": float(ms.mean()),
        "recall_at_10_vs_exact": float(
            np.mean([len(set(f) & set(e)) / TOP_K for f, e in zip(found, exact_docs, strict=True)])
        ),
        "source_document_in_top10": float(np.mean([d in f for f, d in zip(found, sources, strict=True)])),
        "source_document_in_exact_top10": float(np.mean([d in e for e, d in zip(exact_docs, sources, strict=True)])),
        "loadavg": loadavg(),
        "times_ms": [round(float(x), 3) for x in ms],
    }


# ------------------------------------------------------------------------------------------------- output
def gib(b: float) -> str:
    return f"{b / 2**30:.2f} GiB"


def render_checkpoints(r: dict) -> list[str]:
    if not r.get("checkpoints"):
        return []
    lines = [
        "",
        f"Measured mid-build (the same store, paused; {r['checkpoints'][0]['search']['queries']} of the queries, "
        "1 thread; recall against the exact top-10 of "
        "the documents written so far):",
        "",
        "| views written | build s so far | resident B/view | peak GiB so far | search p50 / p90 ms | recall@10 |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for c in r["checkpoints"]:
        q = c["search"]
        lines.append(
            f"| {c['views']:,} | {c['build_elapsed_s']:.0f} | {c['resident_bytes_per_view']:.0f} | "
            f"{c['peak_rss_bytes_ru_maxrss'] / 2**30:.2f} | {q['p50_ms']:.1f} / {q['p90_ms']:.1f} | "
            f"{q['recall_at_10_vs_exact']:.3f} |"
        )
    return lines


def render(r: dict) -> str:
    if "build" not in r:
        s = r["settings"]
        head = (
            f"# Streaming build of {s['views']:,} views, `{s['index_factory']}`, `keep_vectors=False`: "
            "in progress (issue 13)"
        )
        return "\n".join([head, "", f"Started {r['started_utc']}; settings {s}.", *render_checkpoints(r)]) + "\n"
    s, b, m = r["settings"], r["build"], r["machine"]
    views = s["views"]
    lines = [
        f"# Streaming build: {views:,} views, `{s['index_factory']}`, `keep_vectors=False` (issue 13)",
        "",
        f"{s['documents']:,} documents x {s['views_per_document']} views, d={s['dim']}, seeded synthetic corpus "
        "(`retrieval_speed.py`'s generator: 1000 topics, correlated unit views), generated and written "
        f"{s['chunk_documents']:,} documents at a time through `write_documents` (views as numpy arrays in `meta`); "
        f"the float32 corpus ({views * s['dim'] * 4 / 2**30:.1f} GiB) never exists whole. "
        f'`FaissMultiViewDocumentStore(embedding_dim={s["dim"]}, index_factory="{s["index_factory"]}", '
        "keep_vectors=False, "
        f"train_size={s['train_size']:,})`: trained once, in the write that reached {s['train_size']:,} rows.",
        "",
        f"Machine: {m.get('cpu', '?')}, {m['cpus']} cores shared with other jobs, {m['mem_total_gib']} GiB RAM, "
        "no GPU; "
        f"FAISS {s['faiss']}, nice {s['nice']}. Load average (1/5/15 min) at start {r['loadavg_start']}, "
        f"after the build {b['loadavg_end']}"
        + (f", during searches {r['search']['loadavg']}" if "search" in r else "")
        + f". FAISS threads for writes and training: {s['build_threads']}; BLAS and OpenMP pinned to 1 thread at "
        f"process start (OMP_WAIT_POLICY={s['omp_wait_policy']}); searches with `search_threads=1`.",
        "",
        "| measure | value |",
        "|---|---:|",
        f"| training (the `write_documents` call that reached `train_size`, incl. encoding its staged rows) | "
        f"{b['training_write_call_s']:.0f} s |",
        f"| whole build, wall (generation and exact reference included) | {b['wall_s']:.0f} s |",
        f"| of which `write_documents` | {b['write_documents_s']:.0f} s ({b['store_views_per_s']:,.0f} views/s) |",
        f"| of which generating rows / making Documents / exact reference | {b['generate_s']:.0f} / "
        f"{b['make_documents_s']:.0f} / {b['exact_reference_s']:.0f} s |",
        "| peak resident memory of the process while building (ru_maxrss) | "
        f"**{gib(b['peak_rss_bytes_ru_maxrss'])}** |",
        f"| baseline before the first chunk (Python, Haystack, FAISS, queries) | {gib(b['baseline_rss_bytes'])} |",
        f"| resident memory after the build | {gib(b['rss_after_bytes'])} |",
        f"| **resident bytes per view** (after minus baseline, / {views:,}) | "
        f"**{b['resident_bytes_per_view']:.0f} B** |",
        f"| FAISS index serialized, per view | {b['index_serialized_bytes_per_view']:.1f} B "
        f"({gib(b['index_serialized_bytes'])}) |",
        f"| float32 rows held by the store after the build | {b['float32_rows_held_bytes']} B |",
    ]
    if "after_training" in r:
        a = r["after_training"]
        lines.append(
            f"| peak up to the end of the chunk whose write trained the index ({a['views_written']:,} views) | "
            f"{gib(a['phase_peak_rss_bytes'])} |"
        )
    if "search" in r:
        q = r["search"]
        lines += [
            f"| **search p50** / p90, top_k=10, 1 thread, {q['queries']} queries | **{q['p50_ms']:.0f} ms** / "
            f"{q['p90_ms']:.0f} ms (min {q['min_ms']:.0f}, max {q['max_ms']:.0f}) |",
            f"| recall@10 of documents vs exact max-over-views (float32) | {q['recall_at_10_vs_exact']:.3f} |",
            f"| query's source document in the top-10 (store / exact) | {q['source_document_in_top10']:.2f} / "
            f"{q['source_document_in_exact_top10']:.2f} |",
        ]
    if "batch64" in r:
        bb = r["batch64"]
        lines.append(
            f"| `search_batch` of 64 queries, {bb['faiss_threads']} threads (median of {bb['repeats']}) | "
            f"{bb['median_s']:.2f} s = {bb['queries_per_s']:.1f} queries/s |"
        )
    if "persistence" in r:
        p = r["persistence"]
        lines += [
            f"| `save` / `load` | {p['save_s']:.0f} s / {p['load_s']:.0f} s (same top-10 after load: "
            f"{p['loaded_same_top10']}) |",
            f"| saved on disk, per view | {p['disk_bytes_per_view']:.1f} B ({gib(p['disk_bytes'])}) |",
        ]
    lines += render_checkpoints(r)
    lines += [
        "",
        "Resident bytes per view cover everything the store holds: the Haystack Documents and their id maps, the "
        "store's per-document view counts, the OPQ48 codes (48 B), the `IndexIDMap2` label array (8 B) and its "
        "reverse hash map, the OPQ rotation and codebooks. The peak includes one chunk of generated rows and its "
        "Documents, and the staged rows before training.",
        "",
        "Progress (views written, elapsed s, resident GiB, peak GiB so far):",
        "",
        "| views | elapsed s | resident GiB | peak GiB | load |",
        "|---:|---:|---:|---:|---|",
    ]
    for p in b["progress"]:
        lines.append(
            f"| {p['views']:,} | {p['elapsed_s']:.0f} | {p['rss_gib']:.2f} | {p['peak_gib']:.2f} | {p['loadavg']} |"
        )
    if r.get("notes"):
        lines += ["", *r["notes"]]
    return "\n".join(lines) + "\n"


def write_results(result: dict, args, partial: bool = False) -> None:
    name = "store_streaming_build" + (f"_{args.tag}" if args.tag else "")
    write_harness_results(args.output_dir / name, result, markdown=render(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--views", type=int, default=10_000_000)
    parser.add_argument("--k", type=int, default=8, help="views per document")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--factory", default=FACTORY + "np", help="np: without FAISS's polysemous training")
    parser.add_argument("--train-size", type=int, default=16_384)
    parser.add_argument("--chunk-docs", type=int, default=12_500)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--checkpoints", default="100000,1000000", help="comma-separated view counts where search is measured mid-build"
    )
    parser.add_argument("--checkpoint-queries", type=int, default=20)
    parser.add_argument(
        "--threads", type=int, default=0, help="FAISS threads for writes and training (0: every core, the default)"
    )
    parser.add_argument("--log-every", type=int, default=10, help="chunks between progress lines")
    parser.add_argument("--no-batch", dest="batch", action="store_false")
    parser.add_argument("--batch-repeats", type=int, default=2)
    parser.add_argument("--no-save", dest="save", action="store_false")
    parser.add_argument("--tmp", default=None, help="directory for the saved copy")
    parser.add_argument("--tag", default="", help="suffix of the result files")
    parser.add_argument("--note", action="append", default=[], help="a line added to the results (repeatable)")
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    args = parser.parse_args()
    args.threads = args.threads or None
    result = run(args)
    print(render(result))


if __name__ == "__main__":
    main()
