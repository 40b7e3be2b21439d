"""FAISS store ``search`` per query, this checkout against another commit's, interleaved round by round.

    git worktree add /tmp/before <commit>
    python -m benchmarks.search_path --before /tmp/before --name straight-query-path

Each side is a process of its own (``PYTHONPATH`` set to its checkout) that builds the same seeded synthetic store
(documents with content, snippet spans and meta; ``--documents`` x ``--views`` views of ``--dim``, one store per
``--indexes`` type) and answers ``round`` commands on stdin with the mean ms of ``store.search`` over the same seeded
queries (top 10). The driver sends each round to one side, then the other, alternating which goes first, so a
shared machine's load changes both alike; it records the load average of every round. 1 thread (FAISS, BLAS).
Writes ``benchmarks/results/search_path.<name>.{json,md}``: per index type the ratio after / before of each round's
mean, its median and range.
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


def build_store(index_factory: str, documents: int, views: int, dim: int, seed: int):
    """A store of ``documents`` seeded documents of ``views`` unit views each (view 0 whole, the rest snippets)."""
    import numpy as np
    from haystack import Document

    from haystack_mvr.document_stores import FaissMultiViewDocumentStore

    rng = np.random.default_rng(seed)
    store = FaissMultiViewDocumentStore(embedding_dim=dim, index_factory=index_factory, keep_vectors=True)
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


def serve(args: argparse.Namespace) -> None:
    """One side: build the stores, then answer each ``round`` line with ``{index: mean ms}``."""
    import numpy as np

    stores = {f: build_store(f, args.documents, args.views, args.dim, args.seed) for f in args.indexes}
    rng = np.random.default_rng(args.seed + 1)
    queries = rng.standard_normal((args.queries, args.dim)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    for store in stores.values():  # warm-up
        for q in queries[:10]:
            store.search(q, top_k=10)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip() != "round":
            break
        out = {}
        for name, store in stores.items():
            start = time.perf_counter()
            for q in queries:
                store.search(q, top_k=10)
            out[name] = (time.perf_counter() - start) * 1000 / len(queries)
        print(json.dumps(out), flush=True)


def drive(args: argparse.Namespace) -> None:
    """Start both sides, alternate rounds, write the results."""
    sides = {"before": Path(args.before).resolve(), "after": REPO}
    common = [
        "--serve",
        "--documents", str(args.documents), "--views", str(args.views), "--dim", str(args.dim),
        "--queries", str(args.queries), "--seed", str(args.seed), "--indexes", *args.indexes,
    ]  # fmt: skip
    procs = {}
    # Each side runs this checkout's benchmarks package (linked into an empty folder it starts in) over its own
    # haystack_mvr (PYTHONPATH): the other checkout may predate this script.
    shared = Path(tempfile.mkdtemp(prefix="search_path-"))
    (shared / "benchmarks").symlink_to(REPO / "benchmarks")
    for name, root in sides.items():
        env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        procs[name] = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.search_path", *common],
            cwd=shared, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
    for proc in procs.values():
        json.loads(proc.stdout.readline())
    rounds = []
    for r in range(args.rounds):
        order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
        record = {"load": os.getloadavg()[0]}
        for name in order:
            procs[name].stdin.write("round\n")
            procs[name].stdin.flush()
            record[name] = json.loads(procs[name].stdout.readline())
        rounds.append(record)
        print(r, json.dumps(record), flush=True)
    for proc in procs.values():
        proc.stdin.close()
        proc.wait()
    summary = {}
    for index in args.indexes:
        ratios = [rd["after"][index] / rd["before"][index] for rd in rounds]
        summary[index] = {
            "before_ms": statistics.median(rd["before"][index] for rd in rounds),
            "after_ms": statistics.median(rd["after"][index] for rd in rounds),
            "ratio_median": statistics.median(ratios),
            "ratio_min": min(ratios),
            "ratio_max": max(ratios),
        }
    before_commit = subprocess.run(
        ["git", "-C", str(sides["before"]), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    payload = {
        "command": " ".join(["python -m benchmarks.search_path", *sys.argv[1:]]),
        "machine": machine_label(threads=1),
        "date": utc_now(),
        "before": before_commit,
        "settings": {k: getattr(args, k) for k in ("documents", "views", "dim", "queries", "rounds", "seed")},
        "indexes": args.indexes,
        "summary": summary,
        "rounds": rounds,
    }
    loads = [rd["load"] for rd in rounds]
    lines = [
        f"# FAISS store search per query: this checkout against {before_commit}",
        "",
        f"`{payload['command']}`: {args.documents} documents x {args.views} views of {args.dim} (seeded, unit "
        f"length, spans and meta), {args.queries} queries a round, top 10, 1 thread, {args.rounds} rounds "
        f"alternating which side goes first. {payload['machine']}, load average {min(loads):.1f}-{max(loads):.1f}, "
        f"{payload['date']}.",
        "",
        "| index | before ms | after ms | after / before (median of rounds) | range |",
        "|---|---:|---:|---:|---:|",
    ]
    for index, s in summary.items():
        lines.append(
            f"| {index} | {s['before_ms']:.3f} | {s['after_ms']:.3f} | **{s['ratio_median']:.3f}x** | "
            f"{s['ratio_min']:.3f}-{s['ratio_max']:.3f}x |"
        )
    path = write_results(RESULTS / f"search_path.{args.name}", payload, markdown="\n".join(lines) + "\n")
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
    parser.add_argument("--indexes", nargs="+", default=["Flat", "HNSW32", "PQ48"])
    args = parser.parse_args(argv)
    if args.serve:
        serve(args)
    elif not args.before:
        parser.error("--before DIR is required")
    else:
        drive(args)


if __name__ == "__main__":
    main()
