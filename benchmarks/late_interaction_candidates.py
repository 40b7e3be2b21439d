"""Candidate stages for late interaction (issue 49): which finds exact MaxSim's top 10 in the fewest documents, and at
what cost. Each stage ranks every document cheaply; exact MaxSim re-scores its first N, so the share of exact MaxSim's
top 10 among them is the recall@10 the search ends with.

    python -m benchmarks.late_interaction_candidates --model runs/colbert-minilm

On ``late_interaction_scale``'s real corpus (a ColBERT's token vectors of squad-mv's paragraphs and ``--wiki``
Wikipedia passages, cached in ``--cache-dir``) and squad-mv dev questions' query vectors:

- ``token ANN`` (what the FAISS store does): one ``IVF{nlist},PQ32`` search of ``--depth`` rows for each query vector
  (``nprobe`` lists), each vector's documents in the order of their best row, fused by reciprocal rank;
- ``centroid interaction`` (PLAID's first stages): each token replaced by its IVF centroid; a document scores
  ``sum_i max_j <q_i, c(d_j)>`` over every document, from one ``(m, nlist)`` product and a gather;
- ``MUVERA`` (Dhulipala et al. 2024): fixed-dimensional encodings, ``--reps`` SimHash partitions of ``2^--ksim``
  cells, each cell a ``--dproj``-d random projection of the sum (query) or mean (document, empty cells filled from the
  nearest token by Hamming distance) of its vectors; one inner product a document.

Reports, for N in ``--depths``, the share of exact MaxSim's top 10 among each stage's first N documents, the stage's
ms a query (1 thread: median), and its bytes a token (or a document, for MUVERA). Writes
``benchmarks/results/late_interaction_candidates{--name}.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

if __name__ == "__main__":
    from benchmarks.harness import pin_threads

    pin_threads(default=1)

import numpy as np

from benchmarks.harness import RESULTS, machine_label, rows_table, utc_now, write_results
from benchmarks.late_interaction_codes import Corpus, add_corpus_arguments, token_corpus
from haystack_mvr.document_stores.faiss.view_index import _shortlist


def token_ann(rows, starts, sample, nlist: int, nprobe: int, depth: int):
    import faiss

    index = faiss.index_factory(rows.shape[1], f"IVF{nlist},PQ32", faiss.METRIC_INNER_PRODUCT)
    index.train(sample)
    index.add(rows)
    faiss.extract_index_ivf(index).nprobe = nprobe
    doc_of = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(rows))))

    def rank(q: np.ndarray) -> np.ndarray:
        _, found = index.search(np.ascontiguousarray(q), depth)
        lists = []
        for row in found:
            docs = doc_of[row[row >= 0]]
            _, first = np.unique(docs, return_index=True)
            lists.append(docs[np.sort(first)])
        return _shortlist(lists, len(starts))

    return rank, index, 32


def centroid_interaction(rows, starts, index):
    import faiss

    ivf = faiss.extract_index_ivf(index)
    centroids = ivf.quantizer.reconstruct_n(0, ivf.nlist)
    _, assigned = ivf.quantizer.search(rows, 1)
    assigned = assigned[:, 0].astype(np.int32)

    def rank(q: np.ndarray) -> np.ndarray:
        by_centroid = q @ centroids.T  # (m, nlist)
        scores = np.maximum.reduceat(by_centroid[:, assigned], starts, axis=1).sum(axis=0)
        return np.argsort(-scores, kind="stable")

    return rank, 2 if ivf.nlist <= 1 << 16 else 4


class Muvera:
    """Fixed-dimensional encodings of multi-vector sets (MUVERA), without the final projection."""

    def __init__(self, dim: int, reps: int, ksim: int, dproj: int, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.planes = rng.standard_normal((reps, dim, ksim)).astype(np.float32)
        self.projections = (rng.choice([-1.0, 1.0], size=(reps, dim, dproj)) / np.sqrt(dproj)).astype(np.float32)
        self.cells = 1 << ksim
        self.powers = 1 << np.arange(ksim)

    def _cells(self, vectors: np.ndarray, r: int) -> np.ndarray:
        return ((vectors @ self.planes[r]) > 0).astype(np.int64) @ self.powers

    def encode(self, vectors: np.ndarray, document: bool) -> np.ndarray:
        out = []
        for r in range(len(self.planes)):
            cell = self._cells(vectors, r)
            projected = vectors @ self.projections[r]
            blocks = np.zeros((self.cells, projected.shape[1]), dtype=np.float32)
            np.add.at(blocks, cell, projected)
            if document:
                counts = np.bincount(cell, minlength=self.cells)
                blocks[counts > 0] /= counts[counts > 0, None]
                for empty in np.flatnonzero(counts == 0):  # the token whose SimHash code is nearest in Hamming
                    nearest = int(np.argmin([bin(int(c) ^ int(empty)).count("1") for c in cell]))
                    blocks[empty] = projected[nearest]
            out.append(blocks.ravel())
        return np.concatenate(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--nlist", type=int, default=4096)
    parser.add_argument("--nprobe", type=int, default=16)
    parser.add_argument("--depth", type=int, default=128, help="rows a query vector (token ANN)")
    parser.add_argument("--depths", type=int, nargs="+", default=[32, 64, 128, 256, 512])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--ksim", type=int, default=5)
    parser.add_argument("--dproj", type=int, default=16)
    add_corpus_arguments(parser)
    args = parser.parse_args()

    rows, counts, queries = token_corpus(args)
    docs = np.split(rows, np.cumsum(counts)[:-1])
    corpus = Corpus(rows, counts)
    truth = corpus.top(rows, queries)
    sample = rows[np.random.default_rng(0).choice(len(rows), min(len(rows), 200_000), replace=False)]

    start = time.perf_counter()
    ann, index, ann_bytes = token_ann(rows, corpus.starts, sample, args.nlist, args.nprobe, args.depth)
    built = {"token ANN": time.perf_counter() - start}
    start = time.perf_counter()
    centroids, centroid_bytes = centroid_interaction(rows, corpus.starts, index)
    built["centroid interaction"] = time.perf_counter() - start
    start = time.perf_counter()
    muvera = Muvera(rows.shape[1], args.reps, args.ksim, args.dproj)
    encoded = np.stack([muvera.encode(d, document=True) for d in docs])
    built["MUVERA"] = time.perf_counter() - start
    del docs
    stages = {
        "token ANN": (ann, f"{ann_bytes} B a token (PQ codes)"),
        "centroid interaction": (centroids, f"{centroid_bytes} B a token (a centroid number)"),
        "MUVERA": (
            lambda q: np.argsort(-(encoded @ muvera.encode(q, document=False)), kind="stable"),
            f"{encoded.shape[1] * 4:,} B a document ({encoded.shape[1]:,} floats)",
        ),
    }
    found: dict[str, list[np.ndarray]] = {name: [] for name in stages}
    ms: dict[str, list[float]] = {name: [] for name in stages}
    for q in queries:  # interleaved
        for name, (rank, _) in stages.items():
            start = time.perf_counter()
            found[name].append(rank(q))
            ms[name].append(1000 * (time.perf_counter() - start))
    table = []
    for name, (_, size) in stages.items():
        row = {"stage": name, "size": size, "ms_median": round(statistics.median(ms[name]), 1),
               "build_seconds": round(built[name], 1)}  # fmt: skip
        for n in args.depths:
            share = [len(set(f[:n].tolist()) & set(t.tolist())) / 10 for f, t in zip(found[name], truth, strict=True)]
            row[f"recall@10 in {n}"] = round(float(np.mean(share)), 3)
        table.append(row)
        print(json.dumps(row), flush=True)
    payload = {
        "command": f"python -m benchmarks.late_interaction_candidates --model {args.model} --queries {args.queries} "
        f"--wiki {args.wiki} --nlist {args.nlist} --nprobe {args.nprobe} --depth {args.depth} --reps {args.reps} "
        f"--ksim {args.ksim} --dproj {args.dproj}",
        "machine": machine_label(threads=args.threads),
        "date": utc_now(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "tokens": len(rows),
        "documents": len(counts),
        "rows": table,
    }
    columns = ["size", "ms_median", "build_seconds", *[f"recall@10 in {n}" for n in args.depths]]
    lines = [
        "# Candidate stages for late interaction",
        "",
        f"`{payload['command']}`. {payload['machine']}, {payload['date']}, load {payload['load_average']}. "
        f"{len(rows):,} token vectors of {len(counts):,} documents, {len(queries)} squad-mv dev questions. "
        "recall@10 in N: the share of exact MaxSim's top 10 among the stage's first N documents (what exact "
        "re-scoring of N candidates ends with).",
        "",
        *rows_table(table, "stage", columns),
    ]
    write_results(RESULTS / f"late_interaction_candidates{args.name}", payload, markdown="\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
