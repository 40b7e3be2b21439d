"""Late interaction at 10^6 and 10^7 token vectors: exact MaxSim by brute force against the compressed store (a
per-token candidate search, then exact MaxSim on the candidates' decoded rows), time a query, memory, recall@10.

    python -m benchmarks.late_interaction_scale --model runs/colbert-minilm --tokens 1000000 10000000

The token vectors are the ColBERT's own: squad-mv's paragraphs and the first ``--wiki`` Wikipedia distractor passages
encoded once (squad-mv's may be read from the store ``late_interaction.py`` saved, ``--store``; cached in
``--cache-dir``): about 10^6 real token vectors. Past those, up to each size, synthetic documents: each as long as a
real one drawn at random, its tokens drawn at random from all the real ones (real token vectors, at a size this
machine cannot encode in a session; their documents are not coherent text). The
queries are the ColBERT's vectors of squad-mv dev questions (``--queries``).

Systems, each a ``FaissMultiViewDocumentStore`` searched with the query's ``(32, 128)`` vectors:

- ``exact``: a ``Flat`` store: MaxSim over every document (float32 rows, 512 bytes a token), the ground truth;
- ``IVF{nlist},PQ32`` and ``IVF{nlist},PQ64x4`` (``keep_vectors=False``): 32 bytes a token either way (32 codes of 8
  bits, or 64 of 4), PQ over the residual to the token's IVF centroid as ColBERTv2 / PLAID compress; candidates are
  the documents of each query vector's ``maxsim_depth`` best rows (``nprobe`` lists), shortlisted and scored by MaxSim
  on their decoded rows. Several ``nprobe`` x depth settings.

Every query runs on every system in turn (interleaved). Reports ms a query (median and p90, 1 thread: FAISS and BLAS
pinned), recall@10 against exact MaxSim, gold R@1 / R@5 (how often the question's own squad-mv paragraph is first /
in the top 5: the end quality, beside the overlap with exact MaxSim), index bytes a token (FAISS's own serialised
size over the tokens: codes, ids and the direct map), the process's peak RSS, build seconds.
Writes ``benchmarks/results/late_interaction_scale{--name}.{json,md}``.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import resource
import statistics
import time
from pathlib import Path

if __name__ == "__main__":
    from benchmarks.harness import pin_threads

    pin_threads(default=1)

import numpy as np

from benchmarks.harness import RESULTS, machine_label, rows_table, utc_now, write_results


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
        from haystack_mvr.document_stores import FaissMultiViewDocumentStore

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


def corpus_of(tokens: int, source: list[np.ndarray], seed: int) -> list[np.ndarray]:
    """The real documents of ``source`` (as many as fit ``tokens``), then, up to ``tokens`` token vectors, synthetic
    documents: each as long as a real one drawn at random, its tokens drawn at random from all the real documents'."""
    rng = np.random.default_rng(seed)
    out, total = [], 0
    for doc in source:
        if total + len(doc) > tokens:
            break
        out.append(doc)
        total += len(doc)
    pool = np.concatenate(source)
    lengths = np.array([len(d) for d in source])
    while total < tokens:
        n = int(lengths[rng.integers(0, len(lengths))])
        out.append(pool[rng.integers(0, len(pool), size=n)])
        total += n
    return out


def build(factory: str, docs: list[np.ndarray], keep_vectors: bool, params: dict):
    from haystack import Document

    from haystack_mvr.document_stores import FaissMultiViewDocumentStore

    store = FaissMultiViewDocumentStore(
        embedding_dim=docs[0].shape[1],
        index_factory=factory,
        keep_vectors=keep_vectors,
        search_parameters=params or None,
        train_size=min(sum(map(len, docs)), 200_000) if factory != "Flat" else None,
    )
    start = time.perf_counter()
    for lo in range(0, len(docs), 2000):
        batch = [
            Document(id=f"d{i}", content=None, meta={"mvr_views": docs[i]})
            for i in range(lo, min(len(docs), lo + 2000))
        ]
        store.write_documents(batch)
    return store, time.perf_counter() - start


def index_bytes(store) -> int:
    import faiss

    return len(faiss.serialize_index(store.faiss_index))


def gold_documents(count: int) -> list[str]:
    """The store ids (``d{corpus position}``: squad-mv's paragraphs come first) of the first ``count`` dev questions'
    gold paragraphs."""
    from haystack_mvr.datasets import default_data_dir, load_corpus, load_questions, split_by_article

    data_dir = default_data_dir()
    position = {p.id: i for i, p in enumerate(load_corpus(data_dir / "squad-mv" / "corpus.jsonl"))}
    _, dev = split_by_article(load_questions(data_dir / "squad-mv" / "train.jsonl"))
    return [f"d{position[q.positive_id]}" for q in dev[:count]]


def gold_recall(found: list[list[str]], gold: list[str], k: int) -> float:
    return round(100 * float(np.mean([g in f[:k] for f, g in zip(found, gold, strict=True)])), 1)


def timed_search(store, queries: list[np.ndarray], top_k: int = 10) -> tuple[list[list[str]], list[float]]:
    ids, ms = [], []
    for q in queries:
        start = time.perf_counter()
        found = store.search(q, top_k=top_k)
        ms.append(1000 * (time.perf_counter() - start))
        ids.append([d.id for d in found])
    return ids, ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--tokens", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--wiki", type=int, default=5000, help="Wikipedia passages encoded beside squad-mv's")
    parser.add_argument("--nlist", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument(
        "--factories", nargs="+", default=["IVF{nlist},PQ32", "IVF{nlist},PQ64x4"], help="32 bytes a token each"
    )
    parser.add_argument("--settings", nargs="+", default=["8:64", "16:64", "16:128", "32:256"], help="nprobe:depth")
    parser.add_argument("--cache-dir", type=Path, default=Path("runs/late_interaction_scale"))
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--store", type=Path, default=None, help="a saved FAISS store of squad-mv's token views")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--name", default="", help="a suffix for the results files (e.g. .gold)")
    parser.add_argument(
        "--encoder-kwargs", default="{}", help='JSON encoder_kwargs: {"mode": "tokens"} for a backbone\'s token views'
    )
    args = parser.parse_args()
    from haystack_mvr.document_stores import FaissMultiViewDocumentStore
    from haystack_mvr.document_stores.faiss.view_index import ViewIndex

    source, all_queries = squad_tokens(
        args.model, args.cache_dir, args.batch_size, args.store, args.wiki, json.loads(args.encoder_kwargs)
    )
    queries = all_queries[: args.queries]
    gold = gold_documents(len(queries))
    rows = []
    for tokens, nlist in zip(args.tokens, args.nlist, strict=False):
        docs = corpus_of(tokens, source, seed=tokens)
        n_tokens = sum(map(len, docs))
        exact, exact_build = build("Flat", docs, True, {})
        stores, sizes, seconds = {}, {}, {}
        for template in args.factories:
            factory = template.format(nlist=nlist)
            built, seconds[factory] = build(factory, docs, False, {"nprobe": 8})
            sizes[factory] = index_bytes(built) / n_tokens
            saved = args.cache_dir / f"{factory.replace(',', '_')}-{n_tokens}"
            built.save(saved)
            del built
            for setting in args.settings:
                nprobe, depth = (int(x) for x in setting.split(":"))
                stores[(factory, nprobe, depth)] = FaissMultiViewDocumentStore(
                    index_path=str(saved), search_parameters={"nprobe": nprobe}
                )
        del docs
        truth, found = [], {key: [] for key in stores}
        ms: dict[object, list[float]] = {"exact": [], **{key: [] for key in stores}}
        for q in queries:  # interleaved: each query on every system in turn
            ids, took = timed_search(exact, [q])
            truth += ids
            ms["exact"] += took
            for key, store in stores.items():
                ViewIndex.maxsim_depth = key[2]
                ids, took = timed_search(store, [q])
                found[key] += ids
                ms[key] += took
        rows.append({
            "tokens": n_tokens, "documents": exact.count_documents(), "system": "exact MaxSim (Flat, float32)",
            "gold_R@1": gold_recall(truth, gold, 1), "gold_R@5": gold_recall(truth, gold, 5),
            "ms_median": round(statistics.median(ms["exact"]), 1),
            "ms_p90": round(float(np.percentile(ms["exact"], 90)), 1),
            "recall@10": 1.0, "index_bytes_per_token": 4 * source[0].shape[1] + 8,  # float32 rows and their ids
            "build_seconds": round(exact_build, 1),
        })  # fmt: skip
        for (factory, nprobe, depth), hits in found.items():
            recall = float(np.mean([len(set(f) & set(t)) / len(t) for f, t in zip(hits, truth, strict=True)]))
            took = ms[(factory, nprobe, depth)]
            rows.append({
                "tokens": n_tokens, "documents": rows[-1]["documents"], "system": factory,
                "nprobe": nprobe, "maxsim_depth": depth, "ms_median": round(statistics.median(took), 1),
                "ms_p90": round(float(np.percentile(took, 90)), 1),
                "recall@10": round(recall, 3), "gold_R@1": gold_recall(hits, gold, 1),
                "gold_R@5": gold_recall(hits, gold, 5), "index_bytes_per_token": round(sizes[factory], 1),
                "build_seconds": round(seconds[factory], 1),
            })  # fmt: skip
        for row in rows:
            print(json.dumps(row), flush=True)
        del exact, stores
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    payload = {
        "command": "python -m benchmarks.late_interaction_scale " + " ".join(
            f"--{k.replace('_', '-')} {' '.join(map(str, v)) if isinstance(v, list) else v}"
            for k, v in vars(args).items()
        ),
        "machine": machine_label(threads=args.threads),
        "date": utc_now(),
        "peak_rss_mib": round(peak),
        "rows": rows,
    }  # fmt: skip
    columns = ["tokens", "documents", "nprobe", "maxsim_depth", "ms_median", "ms_p90", "recall@10", "gold_R@1",
               "gold_R@5", "index_bytes_per_token", "build_seconds"]  # fmt: skip
    lines = [
        "# Late interaction at scale: exact MaxSim against the compressed store",
        "",
        f"`{payload['command']}`. {payload['machine']}, {payload['date']}, peak RSS {payload['peak_rss_mib']} MiB. "
        f"{len(queries)} squad-mv dev questions (32 query vectors each), top 10; recall@10 against exact MaxSim.",
        "",
        *rows_table(rows, "system", columns),
    ]
    write_results(RESULTS / f"late_interaction_scale{args.name}", payload, markdown="\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
