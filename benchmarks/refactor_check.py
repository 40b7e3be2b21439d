"""Before/after check for a refactor: the same public-API workloads on two trees, interleaved, one subprocess per run.

    python -m benchmarks.refactor_check --before a370c77 --rounds 5

Each round runs the workload once on a worktree of ``--before`` and once on this tree (order alternating per round), in
fresh processes pinned to one thread (torch, FAISS, BLAS). The workload touches only what a user touches, so it runs
unchanged on both trees:

- ``index_snippet``: a Haystack indexing pipeline (``MultiViewDocumentEmbedder`` in snippet mode with the packaged
  all-MiniLM-L6-v2 -> ``DocumentWriter`` -> FAISS Flat store) over squad-mv paragraphs;
- ``index_viewer``: the same with an MVR checkpoint in the ``multi_view_config.json`` format (written once by the
  ``--before`` tree, 8 viewer tokens on MiniLM), so the loading/conversion path is on the clock;
- ``query_pipeline``: ``MultiViewTextEmbedder -> MultiViewRetriever`` over the snippet store, one question at a time;
- ``store_write`` / ``store_search`` / ``store_save`` / ``store_load``: a FAISS Flat store of synthetic documents
  (8 unit views each, as the embedders attach them), retriever calls with ``list[float]`` queries, save and load;
- ``qdrant_write`` / ``qdrant_search``: the same documents in a local-mode Qdrant store (fewer of them).

Per phase: the ratio after / before of CPU seconds (``time.process_time``) and of wall seconds, per round, median and
range, plus the load average at start and end. Writes ``results/refactor_check.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.harness import REPO, RESULTS, machine_info, utc_now, write_results

PINNED = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "HAYSTACK_TELEMETRY_ENABLED": "False",
}

WORKER = r"""
import json, os, sys, tempfile, time
import numpy as np
import torch
torch.set_num_threads(1)
import faiss
faiss.omp_set_num_threads(1)
args = json.loads(sys.argv[1])
from haystack import Document, Pipeline
from haystack.components.writers import DocumentWriter
from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder
from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.document_stores import FaissMultiViewDocumentStore
from haystack_mvr.views import attach_views

out = {}
def phase(name, fn):
    c0, w0 = time.process_time(), time.perf_counter()
    result = fn()
    out[name] = {"cpu": time.process_time() - c0, "wall": time.perf_counter() - w0}
    return result

rows = [json.loads(line) for line in open(args["corpus"], encoding="utf-8")][: args["paragraphs"]]
docs = lambda: [Document(id=r["id"], content=r["text"], meta={"title": r["title"]}) for r in rows]
questions = args["questions"]

def indexing(model):
    store = FaissMultiViewDocumentStore(index_factory="Flat")
    pipe = Pipeline()
    pipe.add_component("embedder", MultiViewDocumentEmbedder(model=model, meta_fields_to_embed=["title"]))
    pipe.add_component("writer", DocumentWriter(document_store=store))
    pipe.connect("embedder.documents", "writer.documents")
    pipe.warm_up()
    return store, pipe

store, pipe = indexing(args["model"])
phase("index_snippet", lambda: pipe.run({"embedder": {"documents": docs()}}))
viewer_store, viewer_pipe = indexing(args["viewer_checkpoint"])
phase("index_viewer", lambda: viewer_pipe.run({"embedder": {"documents": docs()[: args["viewer_paragraphs"]]}}))

query = Pipeline()
query.add_component("embedder", MultiViewTextEmbedder(model=args["model"]))
query.add_component("retriever", MultiViewRetriever(document_store=store, top_k=10))
query.connect("embedder.embedding", "retriever.query_embedding")
query.warm_up()
query.run({"embedder": {"text": questions[0]}})
phase("query_pipeline", lambda: [query.run({"embedder": {"text": q}}) for q in questions])

rng = np.random.default_rng(0)
n, k, d = args["synthetic_documents"], 8, 384
vectors = rng.standard_normal((n, k, d), dtype=np.float32)
vectors /= np.linalg.norm(vectors, axis=-1, keepdims=True)
synthetic = [
    attach_views(Document(id=f"s{i}", content=f"document {i}", meta={"n": i % 10}), vectors[i]) for i in range(n)
]
queries = rng.standard_normal((args["searches"], d), dtype=np.float32)
queries /= np.linalg.norm(queries, axis=-1, keepdims=True)
query_lists = [q.tolist() for q in queries]

big = FaissMultiViewDocumentStore(index_factory="Flat")
phase("store_write", lambda: big.write_documents(synthetic))
retriever = MultiViewRetriever(document_store=big, top_k=10)
retriever.run(query_embedding=query_lists[0])
phase("store_search", lambda: [retriever.run(query_embedding=q) for q in query_lists])
with tempfile.TemporaryDirectory() as tmp:
    phase("store_save", lambda: big.save(os.path.join(tmp, "index")))
    loaded = FaissMultiViewDocumentStore(index_factory="Flat")
    phase("store_load", lambda: loaded.load(os.path.join(tmp, "index")))
    assert loaded.count_documents() == n

from haystack_mvr.document_stores import QdrantMultiViewDocumentStore
qdrant = QdrantMultiViewDocumentStore(location=":memory:", embedding_dim=d)
few = synthetic[: args["qdrant_documents"]]
phase("qdrant_write", lambda: qdrant.write_documents(few))
qretriever = MultiViewRetriever(document_store=qdrant, top_k=10)
qretriever.run(query_embedding=query_lists[0])
phase("qdrant_search", lambda: [qretriever.run(query_embedding=q) for q in query_lists[: args["qdrant_searches"]]])
print("RESULT " + json.dumps(out))
"""

MAKE_VIEWER = r"""
import sys
try:  # a sentence-transformers MultiVectorEncoder checkpoint (issue 40 on)
    from haystack_mvr.modeling.st_modules import viewer_encoder
except ImportError:  # a tree from before: its own checkpoint format
    from haystack_mvr.modeling.encoder import MultiViewEncoder
    MultiViewEncoder.from_pretrained(sys.argv[1], mode="mvr", num_views=8).save_pretrained(sys.argv[2])
else:
    viewer_encoder(sys.argv[1], mode="mvr", views=8).save(sys.argv[2])
"""


def worktree(commit: str) -> Path:
    path = Path(tempfile.gettempdir()) / f"haystack-mvr-{commit}"
    if not path.exists():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), commit], check=True)
    return path


def run_in(tree: Path, code: str, *argv: str) -> str:
    env = {**os.environ, **PINNED, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], cwd=tree, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"worker failed in {tree}:\n{done.stderr[-4000:]}")
    return done.stdout


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="The commit to compare against.")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--paragraphs", type=int, default=200)
    parser.add_argument("--viewer-paragraphs", type=int, default=100)
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--synthetic-documents", type=int, default=20000)
    parser.add_argument("--searches", type=int, default=300)
    parser.add_argument("--qdrant-documents", type=int, default=2000)
    parser.add_argument("--qdrant-searches", type=int, default=100)
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data" / "squad-mv")
    parser.add_argument("--name", default="refactor_check")
    args = parser.parse_args()

    from benchmarks.packaged_model import packaged_minilm

    model = packaged_minilm()
    before = worktree(args.before)
    viewer = Path(tempfile.gettempdir()) / f"haystack-mvr-viewer-checkpoint-{args.before}"
    if not (viewer / "multi_view_config.json").is_file() and not (viewer / "modules.json").is_file():
        run_in(before, MAKE_VIEWER, model, str(viewer))
    with open(args.data_dir / "train.jsonl", encoding="utf-8") as lines:
        questions = [json.loads(line)["question"] for line in lines]
    settings = {
        "corpus": str(args.data_dir / "corpus.jsonl"),
        "paragraphs": args.paragraphs,
        "viewer_paragraphs": args.viewer_paragraphs,
        "questions": questions[: args.questions],
        "model": model,
        "viewer_checkpoint": str(viewer),
        "synthetic_documents": args.synthetic_documents,
        "searches": args.searches,
        "qdrant_documents": args.qdrant_documents,
        "qdrant_searches": args.qdrant_searches,
    }
    load_start = os.getloadavg()
    trees = {"before": before, "after": REPO}
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    for round_ in range(args.rounds):
        order = ["before", "after"] if round_ % 2 == 0 else ["after", "before"]
        for name in order:
            stdout = run_in(trees[name], WORKER, json.dumps(settings))
            runs[name].append(json.loads(stdout.rsplit("RESULT ", 1)[1]))
        print(f"round {round_ + 1}/{args.rounds}: load {os.getloadavg()[0]:.2f}", flush=True)
    load_end = os.getloadavg()
    phases = list(runs["after"][0])
    ratios = {
        phase: {
            clock: spread(
                [a[phase][clock] / b[phase][clock] for a, b in zip(runs["after"], runs["before"], strict=True)]
            )
            for clock in ("cpu", "wall")
        }
        for phase in phases
    }
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    payload = {
        "date": utc_now(),
        "machine": machine_info(),
        "before": args.before,
        "after": commit.stdout.strip(),
        "threads": 1,
        "settings": {k: v for k, v in settings.items() if k != "questions"},
        "load_average_start": load_start,
        "load_average_end": load_end,
        "runs": runs,
        "ratios_after_over_before": ratios,
    }
    lines = [
        f"# Refactor check: {payload['after']} against {args.before} ({args.rounds} interleaved rounds, 1 thread, "
        f"{utc_now()})",
        "",
        f"Load average at start {load_start[0]:.2f} / {load_start[1]:.2f}, "
        f"at end {load_end[0]:.2f} / {load_end[1]:.2f}. Ratio after / before per round; below 1 is faster after.",
        "",
        "| phase | CPU ratio (median) | range | wall ratio (median) | range | CPU s before (median) |",
        "|---|---:|---|---:|---|---:|",
    ]
    for phase in phases:
        cpu, wall = ratios[phase]["cpu"], ratios[phase]["wall"]
        before_cpu = statistics.median(r[phase]["cpu"] for r in runs["before"])
        lines.append(
            f"| {phase} | {cpu['median']:.3f}x | {cpu['min']:.3f}-{cpu['max']:.3f} | {wall['median']:.3f}x | "
            f"{wall['min']:.3f}-{wall['max']:.3f} | {before_cpu:.2f} |"
        )
    markdown = "\n".join(lines) + "\n"
    write_results(RESULTS / args.name, payload, markdown=markdown)
    print(markdown)


if __name__ == "__main__":
    main()
