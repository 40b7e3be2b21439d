"""How much of exact MaxSim a token code keeps: each code on a ColBERT's real token vectors, every document scored by
MaxSim on its decoded rows (no candidate stage, so only the code's error counts), against MaxSim on float32 rows.

    python -m benchmarks.late_interaction_codes --model runs/colbert-minilm \\
        --codes IVF4096,PQ32 colbertv2:4096 IVF4096,PQ64 pca64:IVF4096,PQ32

The corpus: squad-mv's paragraphs and the first ``--wiki`` Wikipedia passages, the
model's token vectors cached in ``--cache-dir`` (about 780k tokens at 5,500 passages); the queries, the first
``--queries`` squad-mv dev questions' query vectors. Codes:

- a FAISS ``index_factory`` string (inner product), trained on ``--train`` random tokens, rows decoded with
  ``sa_decode`` (an IVF's code includes its list number, counted in ``code_bytes``);
- ``colbertv2:{nlist}``: ColBERTv2's residual compression, a token's nearest of ``nlist`` centroids and 2 bits a
  dimension of its residual (4 buckets a dimension at the residuals' quartiles, decoded to each bucket's mean);
- ``pca{k}:{code}``: the vectors (and queries) projected on their top ``k`` principal directions and scaled to unit
  length, then ``code``: what a ``k``-dimensional model would give, before training it at ``k`` dimensions.

Each code is scored as decoded and with decoded rows scaled back to unit length (the store does so for a normalising
encoder's rows). Reports code bytes a token, mean squared error of the decoded rows, recall@10 against exact MaxSim
(float32, same dimensions), and gold R@1 / R@5 (the question's own squad-mv paragraph first / in the top 5).
Writes ``benchmarks/results/late_interaction_codes{--name}.{json,md}``.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import shlex
import time
from pathlib import Path

if __name__ == "__main__":
    from benchmarks.harness import pin_threads

    pin_threads(default=1)

import numpy as np

from benchmarks.harness import RESULTS, machine_label, rows_table, utc_now, write_results
from haystack_mvr.modeling.loading import portable_model_name

TOP = 10


def unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.maximum(np.linalg.norm(rows, axis=-1, keepdims=True), 1e-12)


class Corpus:
    """Token rows grouped by document, scored by MaxSim for a query ``(m, d)`` in one matrix product."""

    def __init__(self, rows: np.ndarray, counts: np.ndarray) -> None:
        self.rows = rows
        self.starts = np.concatenate([[0], np.cumsum(counts)[:-1]])

    def top(self, decoded: np.ndarray, queries: np.ndarray) -> list[np.ndarray]:
        """Each query's ``TOP`` documents by MaxSim on ``decoded`` rows (best first)."""
        out = []
        for q in queries:
            scores = np.maximum.reduceat(decoded @ q.T, self.starts, axis=0).sum(axis=1)
            best = np.argpartition(-scores, TOP)[:TOP]
            out.append(best[np.argsort(-scores[best], kind="stable")])
        return out


def add_corpus_arguments(parser: argparse.ArgumentParser) -> None:
    """The token corpus's options (its cache), and the run's."""
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--wiki", type=int, default=5500, help="Wikipedia passages beside squad-mv's paragraphs")
    parser.add_argument("--cache-dir", type=Path, default=Path("runs/late_interaction_scale"))
    parser.add_argument("--store", type=Path, default=None, help="a saved FAISS store of squad-mv's token views")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--name", default="", help="a suffix for the results files")
    parser.add_argument(
        "--encoder-kwargs", default="{}", help='JSON encoder_kwargs: {"mode": "tokens"} for a backbone\'s token views'
    )


def squad_tokens(
    model: str,
    cache: Path,
    batch_size: int,
    store: Path | None = None,
    wiki: int = 0,
    encoder_kwargs: dict | None = None,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The ColBERT's token matrices of squad-mv's paragraphs (read from a saved ``store`` of them, or encoded) and of
    the first ``wiki`` distractor passages, and its dev questions' query vectors, cached; ``encoder_kwargs``
    ``{"mode": "tokens"}`` for a plain backbone's token views."""
    path = cache / f"squad-mv+{wiki}-tokens.npz"
    if path.exists():
        data = np.load(path)
        docs = np.split(data["rows"], np.cumsum(data["counts"])[:-1])
        queries = list(data["queries"])
        return docs, queries
    from haystack_mvr.datasets import default_data_dir, load_corpus, load_questions, split_by_article
    from haystack_mvr.modeling.st_encoder import open_encoder
    from haystack_mvr.views import document_views

    data_dir = default_data_dir()
    encoder = open_encoder(model, "cpu", **(encoder_kwargs or {}))
    _, dev = split_by_article(load_questions(data_dir / "squad-mv" / "train.jsonl"))
    if store is not None:  # the squad-mv store benchmarks/late_interaction.py saved: its token views, not encoded again
        from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore

        saved = FaissMultiViewDocumentStore(index_path=str(store))
        docs = [document_views(d) for batch in saved.export_documents() for d in batch]
    else:
        corpus = load_corpus(data_dir / "squad-mv" / "corpus.jsonl")
        docs = [d.views for d in encoder.encode_documents([p.text for p in corpus], batch_size=batch_size)]
    if wiki:
        with gzip.open(data_dir / "wiki-distractors" / "passages-200k.jsonl.gz", "rt", encoding="utf-8") as f:
            texts = [json.loads(line)["text"] for line in itertools.islice(f, wiki)]
        docs += [d.views for d in encoder.encode_documents(texts, batch_size=batch_size)]
    queries = encoder.query_views([q.question for q in dev[:200]])
    width = max(len(q) for q in queries)  # zero rows pad a shorter query: each adds 0 to every MaxSim
    queries = [np.pad(q, ((0, width - len(q)), (0, 0))) for q in queries]
    cache.mkdir(parents=True, exist_ok=True)
    np.savez(
        path,
        rows=np.concatenate(docs),
        counts=np.array([len(d) for d in docs]),
        queries=np.stack(queries),
    )
    return docs, queries


def gold_documents(count: int) -> list[str]:
    """The store ids (``d{corpus position}``: squad-mv's paragraphs come first) of the first ``count`` dev questions'
    gold paragraphs."""
    from haystack_mvr.datasets import default_data_dir, load_corpus, load_questions, split_by_article

    data_dir = default_data_dir()
    position = {p.id: i for i, p in enumerate(load_corpus(data_dir / "squad-mv" / "corpus.jsonl"))}
    _, dev = split_by_article(load_questions(data_dir / "squad-mv" / "train.jsonl"))
    return [f"d{position[q.positive_id]}" for q in dev[:count]]


def token_corpus(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The model's token rows ``(n, d)`` (documents in order), each document's row count, and the first
    ``--queries`` dev questions' query vectors ``(q, m, d)``."""
    docs, queries = squad_tokens(
        args.model, args.cache_dir, args.batch_size, args.store, args.wiki, json.loads(args.encoder_kwargs)
    )
    counts = np.array([len(d) for d in docs])
    rows = np.ascontiguousarray(np.concatenate(docs), dtype=np.float32)
    return rows, counts, np.ascontiguousarray(np.stack(queries[: args.queries]))


def colbertv2(rows: np.ndarray, train: np.ndarray, nlist: int, seed: int) -> tuple[np.ndarray, int]:
    """ColBERTv2's 2-bit residual code of ``rows``, decoded, and its bytes a token (a centroid number + the bits)."""
    import faiss

    kmeans = faiss.Kmeans(rows.shape[1], nlist, niter=20, seed=seed, spherical=False)
    kmeans.train(train)
    _, assigned = kmeans.index.search(rows, 1)
    centroids = kmeans.centroids[assigned[:, 0]]
    residual = rows - centroids
    sample = residual[np.random.default_rng(seed).choice(len(rows), min(len(rows), 200_000), replace=False)]
    cuts = np.quantile(sample, [0.25, 0.5, 0.75], axis=0)  # (3, d)
    buckets = (residual[:, None, :] > cuts[None]).sum(axis=1)  # (n, d) in 0..3
    dims = np.arange(rows.shape[1])
    means = np.zeros((4, rows.shape[1]), dtype=np.float32)
    for b in range(4):
        hit = buckets == b
        means[b] = np.where(hit.any(0), (residual * hit).sum(0) / np.maximum(hit.sum(0), 1), 0.0)
    centroid_bytes = 2 if nlist <= 1 << 16 else 4
    return centroids + means[buckets, dims], rows.shape[1] * 2 // 8 + centroid_bytes


def faiss_code(rows: np.ndarray, train: np.ndarray, factory: str) -> tuple[np.ndarray, int]:
    import faiss

    index = faiss.index_factory(rows.shape[1], factory, faiss.METRIC_INNER_PRODUCT)
    index.train(train)
    decoded = np.empty_like(rows)
    for lo in range(0, len(rows), 200_000):
        decoded[lo : lo + 200_000] = index.sa_decode(index.sa_encode(rows[lo : lo + 200_000]))
    return decoded, index.sa_code_size()


def principal(rows: np.ndarray, sample: np.ndarray, k: int) -> np.ndarray:
    """The ``(d, k)`` top principal directions (uncentred, as a projection without bias) of ``sample``."""
    _, vectors = np.linalg.eigh(sample.astype(np.float64).T @ sample)
    return vectors[:, ::-1][:, :k].astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--codes", nargs="+", default=["IVF4096,PQ32", "colbertv2:4096", "IVF4096,PQ64"])
    parser.add_argument("--train", type=int, default=200_000, help="random tokens a code is trained on")
    add_corpus_arguments(parser)
    args = parser.parse_args()

    rows, counts, queries = token_corpus(args)
    gold = np.array([int(g[1:]) for g in gold_documents(len(queries))])
    corpus = Corpus(rows, counts)
    rng = np.random.default_rng(0)
    sample = rows[rng.choice(len(rows), min(len(rows), args.train), replace=False)]
    truth = {rows.shape[1]: corpus.top(rows, queries)}

    def quality(found: list[np.ndarray], exact: list[np.ndarray]) -> dict[str, float]:
        overlap = [len(set(f) & set(t)) / TOP for f, t in zip(found, exact, strict=True)]
        return {
            "recall@10": round(float(np.mean(overlap)), 3),
            "gold_R@1": round(100 * float(np.mean([f[0] == g for f, g in zip(found, gold, strict=True)])), 1),
            "gold_R@5": round(100 * float(np.mean([g in f[:5] for f, g in zip(found, gold, strict=True)])), 1),
        }  # fmt: skip

    table = [{"code": f"float32 ({rows.shape[1]}-d)", "code_bytes": 4 * rows.shape[1], "mse": 0.0, "scaled": "-",
              **quality(truth[rows.shape[1]], truth[rows.shape[1]])}]  # fmt: skip
    print(json.dumps(table[-1]), flush=True)
    for spec in args.codes:
        start = time.perf_counter()
        base, base_sample, base_queries, code = rows, sample, queries, spec
        if spec.startswith("pca"):
            k, _, code = spec[3:].partition(":")
            basis = principal(rows, sample, int(k))
            base, base_sample, base_queries = unit(rows @ basis), unit(sample @ basis), unit(queries @ basis)
            if int(k) not in truth:
                truth[int(k)] = corpus.top(base, base_queries)
                table.append({"code": f"float32 (pca{k})", "code_bytes": 4 * int(k), "mse": 0.0, "scaled": "-",
                              **quality(truth[int(k)], truth[int(k)])})  # fmt: skip
                print(json.dumps(table[-1]), flush=True)
        if code.startswith("colbertv2:"):
            decoded, size = colbertv2(base, base_sample, int(code.split(":")[1]), seed=1)
        else:
            decoded, size = faiss_code(base, base_sample, code)
        seconds = round(time.perf_counter() - start, 1)
        for scaled in (False, True):
            got = unit(decoded) if scaled else decoded
            row = {
                "code": spec, "code_bytes": size, "mse": round(float(((base - got) ** 2).sum(1).mean()), 5),
                "scaled": "unit" if scaled else "as decoded", **quality(corpus.top(got, base_queries),
                truth[base.shape[1]]), "train_encode_seconds": seconds,
            }  # fmt: skip
            table.append(row)
            print(json.dumps(row), flush=True)
    payload = {
        "command": "python -m benchmarks.late_interaction_codes --model "
        + f"{portable_model_name(args.model)} --codes {' '.join(args.codes)}"
        + f" --queries {args.queries} --wiki {args.wiki}"
        + (f" --encoder-kwargs {shlex.quote(args.encoder_kwargs)}" if args.encoder_kwargs != "{}" else "")
        + (f" --store {args.store}" if args.store else "")
        + (f" --train {args.train} --cache-dir {args.cache_dir}" if args.encoder_kwargs != "{}" else ""),
        "machine": machine_label(threads=args.threads),
        "date": utc_now(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "tokens": len(rows),
        "documents": len(counts),
        "rows": table,
    }
    columns = ["code_bytes", "scaled", "mse", "recall@10", "gold_R@1", "gold_R@5"]
    lines = [
        "# Token codes against exact MaxSim",
        "",
        f"`{payload['command']}`. {payload['machine']}, {payload['date']}, load {payload['load_average']}. "
        f"{len(rows):,} token vectors of {len(counts):,} documents (squad-mv + {args.wiki:,} Wikipedia passages), "
        f"{len(queries)} squad-mv dev questions; every document scored by MaxSim on its decoded rows; recall@10 "
        "against exact MaxSim in the same dimensions.",
        "",
        *rows_table(table, "code", columns),
    ]
    write_results(RESULTS / f"late_interaction_codes{args.name}", payload, markdown="\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
