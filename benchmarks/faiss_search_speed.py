"""FAISS store ``search`` per query, this checkout against another commit's, interleaved round by round.

    git worktree add /tmp/before <commit>
    python -m benchmarks.faiss_search_speed --before /tmp/before --name one-scorer

(``search_path.py``, removed, measured Flat, HNSW32 and PQ48 this way; this script adds IVF-PQ and a
late-interaction store.)

Each side is a process of its own (``PYTHONPATH`` set to its checkout) that builds the same seeded synthetic store
(documents with content, snippet spans and meta; ``--documents`` x ``--views`` views of ``--dim``, one store per
``--indexes`` type, an IVF one searched with ``--nprobe``) and answers ``round`` commands on stdin with the mean ms of
``store.search`` over the same seeded queries (top 10). ``--maxsim FACTORY`` adds a late-interaction store:
``--maxsim-documents`` documents of 16 to ``2 x --maxsim-tokens - 16`` unit token views of ``--maxsim-dim``, kept
only as the index's codes (``keep_vectors=False``), searched with ``--query-vectors`` vectors a query (MaxSim; each
query a noisy copy of a random document's tokens). The driver sends each round to one side, then the other,
alternating which goes first, so a shared machine's load changes both alike; it records the load average of every
round. 1 thread (FAISS, BLAS, torch's OpenMP). Writes ``benchmarks/results/faiss_search_speed.<name>.{json,md}``: per
workload each side's median ms and range over the rounds, and the ratio after / before of each round's mean, its
median and range.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import REPO, RESULTS, machine_label, utc_now, write_results

PINNED = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")  # FAISS, numpy's BLAS, torch's pools


def build_store(index_factory: str, documents: int, views: int, dim: int, seed: int, nprobe: int = 16):
    """A store of ``documents`` seeded documents of ``views`` unit views each (view 0 whole, the rest snippets)."""
    import numpy as np
    from haystack import Document

    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore

    rng = np.random.default_rng(seed)
    store = FaissMultiViewDocumentStore(
        embedding_dim=dim,
        index_factory=index_factory,
        keep_vectors=True,
        search_parameters=_params(index_factory, nprobe),
    )
    words = [f"w{i}" for i in range(500)]
    batch = []
    for i in range(documents):
        matrix = rng.standard_normal((views, dim)).astype(np.float32)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        text = " ".join(rng.choice(words, size=views * 12))
        step = len(text) // views
        spans = [None] + [[j * step, (j + 1) * step] for j in range(views - 1)]
        meta = {"mvr_views": matrix.tolist(), "mvr_view_spans": spans, "title": f"t{i % 97}", "n": int(i)}
        batch.append(Document(id=f"d{i}", content=text, meta=meta))
        if len(batch) == 1000:
            store.write_documents(batch)
            batch = []
    if batch:
        store.write_documents(batch)
    return store


def _params(index_factory: str, nprobe: int) -> dict[str, int] | None:
    return {"nprobe": nprobe} if "IVF" in index_factory else None


def build_token_store(args: argparse.Namespace):
    """The late-interaction store: seeded documents of unit token views (each a span of its content), kept only as
    the index's codes; and its seeded ``(m, d)`` queries, each a noisy copy of a random document's tokens."""
    import numpy as np
    from haystack import Document

    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
    from haystack_mvr.views import attach_views

    rng = np.random.default_rng(args.seed + 2)
    store = FaissMultiViewDocumentStore(
        embedding_dim=args.maxsim_dim,
        index_factory=args.maxsim,
        keep_vectors=False,
        search_parameters=_params(args.maxsim, args.nprobe),
    )
    lengths = rng.integers(16, max(17, 2 * args.maxsim_tokens - 16), size=args.maxsim_documents)
    batch, matrices = [], []
    for i, n in enumerate(lengths.tolist()):
        matrix = rng.standard_normal((n, args.maxsim_dim)).astype(np.float32)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        matrices.append(matrix)
        content = " ".join(f"t{j % 997}" for j in range(n))
        spans, at = [], 0
        for j in range(n):
            word = len(f"t{j % 997}")
            spans.append((at, at + word))
            at += word + 1
        batch.append(attach_views(Document(id=f"c{i}", content=content, meta={"n": i}), matrix, spans))
        if len(batch) == 1000:
            store.write_documents(batch)
            batch = []
    if batch:
        store.write_documents(batch)
    queries = []
    for _ in range(args.maxsim_queries):
        tokens = matrices[int(rng.integers(len(matrices)))]
        q = tokens[rng.integers(len(tokens), size=args.query_vectors)]
        q = q + 0.5 * rng.standard_normal(q.shape).astype(np.float32) / np.sqrt(args.maxsim_dim)
        queries.append((q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32))
    return store, queries


def serve(args: argparse.Namespace) -> None:
    """One side: build the stores, then answer each ``round`` line with ``{workload: mean ms}``."""
    import numpy as np

    workloads = {}
    rng = np.random.default_rng(args.seed + 1)
    queries = rng.standard_normal((args.queries, args.dim)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    for f in args.indexes:
        workloads[f] = (build_store(f, args.documents, args.views, args.dim, args.seed, args.nprobe), list(queries))
    if args.maxsim:
        workloads[f"MaxSim {args.maxsim}"] = build_token_store(args)
    for store, asked in workloads.values():  # warm-up
        for q in asked[:10]:
            store.search(q, top_k=10)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip() != "round":
            break
        out = {}
        for name, (store, asked) in workloads.items():
            start = time.perf_counter()
            for q in asked:
                store.search(q, top_k=10)
            out[name] = (time.perf_counter() - start) * 1000 / len(asked)
        print(json.dumps(out), flush=True)


def _commit(root: Path) -> str:
    """The commit a checkout's ``haystack_mvr`` is at, and whether it has changes not committed."""
    run = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", "haystack_mvr"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return run.stdout.strip() + (" + uncommitted changes" if dirty else "")


def drive(args: argparse.Namespace) -> None:
    """Start both sides, alternate rounds, write the results."""
    sides = {"before": Path(args.before).resolve(), "after": REPO}
    before_commit, after_commit = _commit(sides["before"]), _commit(REPO)  # what the two sides import, at their start
    common = [
        "--serve",
        "--documents", str(args.documents), "--views", str(args.views), "--dim", str(args.dim),
        "--queries", str(args.queries), "--seed", str(args.seed), "--nprobe", str(args.nprobe),
        "--maxsim-documents", str(args.maxsim_documents), "--maxsim-tokens", str(args.maxsim_tokens),
        "--maxsim-dim", str(args.maxsim_dim), "--query-vectors", str(args.query_vectors),
        "--maxsim-queries", str(args.maxsim_queries), "--indexes", *args.indexes,
    ]  # fmt: skip
    if args.maxsim:
        common += ["--maxsim", args.maxsim]
    workloads = [*args.indexes, *([f"MaxSim {args.maxsim}"] if args.maxsim else [])]
    load_at_start = os.getloadavg()
    started = time.perf_counter()
    procs = {}
    # Each side runs this checkout's benchmarks package (linked into an empty folder it starts in) over its own
    # haystack_mvr (PYTHONPATH): the other checkout may predate this script.
    shared = Path(tempfile.mkdtemp(prefix="faiss_search_speed-"))
    (shared / "benchmarks").symlink_to(REPO / "benchmarks")
    for name, root in sides.items():
        env = {**os.environ, "PYTHONPATH": str(root), **dict.fromkeys(PINNED, "1")}
        procs[name] = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.faiss_search_speed", *common],
            cwd=shared, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
    for proc in procs.values():
        json.loads(proc.stdout.readline())
    built = time.perf_counter() - started
    rounds = []
    for r in range(args.rounds):
        order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
        record = {"load": os.getloadavg()[0], "first": order[0]}
        for name in order:
            procs[name].stdin.write("round\n")
            procs[name].stdin.flush()
            record[name] = json.loads(procs[name].stdout.readline())
        rounds.append(record)
        print(r, json.dumps(record), flush=True)
    for proc in procs.values():
        proc.stdin.close()
        proc.wait()
    load_at_end = os.getloadavg()
    summary = {}
    for index in workloads:
        ratios = [rd["after"][index] / rd["before"][index] for rd in rounds]
        before = [rd["before"][index] for rd in rounds]
        after = [rd["after"][index] for rd in rounds]
        summary[index] = {
            "before_ms": statistics.median(before),
            "before_ms_range": [min(before), max(before)],
            "after_ms": statistics.median(after),
            "after_ms_range": [min(after), max(after)],
            "ratio_median": statistics.median(ratios),
            "ratio_min": min(ratios),
            "ratio_max": max(ratios),
        }

    argv = list(sys.argv[1:])
    if "--before" in argv:  # the worktree's path is this machine's: the results name its commit instead
        argv[argv.index("--before") + 1] = f"<worktree of {before_commit.split()[0]}>"
    settings = (
        "documents", "views", "dim", "queries", "rounds", "seed", "nprobe", "maxsim", "maxsim_documents",
        "maxsim_tokens", "maxsim_dim", "query_vectors", "maxsim_queries",
    )  # fmt: skip
    payload = {
        "command": " ".join(["python -m benchmarks.faiss_search_speed", *argv]),
        "machine": machine_label(threads=1),
        "date": utc_now(),
        "before": before_commit,
        "after": after_commit,
        "settings": {k: getattr(args, k) for k in settings},
        "indexes": workloads,
        "build_seconds": round(built, 1),
        "load_average_at_start": list(load_at_start),
        "load_average_at_end": list(load_at_end),
        "summary": summary,
        "rounds": rounds,
    }
    loads = [rd["load"] for rd in rounds]
    maxsim = (
        f" MaxSim: {args.maxsim_documents} documents of 16-{max(17, 2 * args.maxsim_tokens - 16) - 1} unit token "
        f"views of {args.maxsim_dim} in `{args.maxsim}` without kept rows, {args.maxsim_queries} queries of "
        f"{args.query_vectors} vectors a round."
        if args.maxsim
        else ""
    )
    lines = [
        f"# FAISS store search per query: {after_commit} against {before_commit}",
        "",
        f"`{payload['command']}`: {args.documents} documents x {args.views} views of {args.dim} (seeded, unit "
        f"length, spans and meta), {args.queries} queries a round, top 10, nprobe {args.nprobe} on IVF, 1 thread, "
        f"{args.rounds} rounds alternating which side goes first.{maxsim} {payload['machine']}, load average (1 min) "
        f"{min(loads):.2f}-{max(loads):.2f} over the rounds ({load_at_start[0]:.2f} / {load_at_start[1]:.2f} / "
        f"{load_at_start[2]:.2f} at the start, {load_at_end[0]:.2f} / {load_at_end[1]:.2f} / {load_at_end[2]:.2f} at "
        f"the end; the two sides are two of the load), {payload['date']}.",
        "",
        "| workload | before ms (median, range) | after ms (median, range) | after / before (median of rounds) "
        "| range |",
        "|---|---:|---:|---:|---:|",
    ]
    for index, s in summary.items():
        lo_b, hi_b = s["before_ms_range"]
        lo_a, hi_a = s["after_ms_range"]
        lines.append(
            f"| {index} | {s['before_ms']:.3f} ({lo_b:.3f}-{hi_b:.3f}) | {s['after_ms']:.3f} ({lo_a:.3f}-{hi_a:.3f}) | "
            f"**{s['ratio_median']:.3f}x** | {s['ratio_min']:.3f}-{s['ratio_max']:.3f}x |"
        )
    path = write_results(RESULTS / f"faiss_search_speed.{args.name}", payload, markdown="\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {path}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--before", help="the other checkout (a git worktree)")
    parser.add_argument("--name", default="compare")
    parser.add_argument("--documents", type=int, default=20000)
    parser.add_argument("--views", type=int, default=6)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--indexes", nargs="+", default=["Flat", "HNSW32", "IVF256,PQ48"])
    parser.add_argument("--nprobe", type=int, default=16, help="an IVF index's nprobe")
    parser.add_argument(
        "--maxsim", default="IVF4096,PQ32", help="the late-interaction store's index factory ('': none)"
    )
    parser.add_argument("--maxsim-documents", type=int, default=6000)
    parser.add_argument("--maxsim-tokens", type=int, default=48, help="token views a document, on average")
    parser.add_argument("--maxsim-dim", type=int, default=128)
    parser.add_argument("--query-vectors", type=int, default=32)
    parser.add_argument("--maxsim-queries", type=int, default=50)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args)
    elif not args.before:
        parser.error("--before DIR is required")
    else:
        drive(args)


if __name__ == "__main__":
    main()
