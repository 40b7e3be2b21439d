"""Which conventions zero-shot token views (``mode="tokens"``) should keep, measured on TRAINING questions only
(issue 54): the special tokens (``[CLS]`` / ``[SEP]``), punctuation (ColBERT's document skiplist), query expansion
with ``[MASK]``, and the document window (tokens a window reads).

    python -m benchmarks.token_view_conventions --tier squad-mv --questions 600

The tier's documents (title + text, as the embedders read them) are encoded once per window length with the
packaged MiniLM's token views; each convention is then a mask over those views (or another query encoding), scored
by exact MaxSim in numpy over every document. Questions are a seeded sample of the training articles' (never dev:
the default is chosen here, then reported on dev by ``benchmarks.late_interaction --tokens``). Writes
``benchmarks/results/token_view_conventions.<tier>.{json,md}``.
"""

from __future__ import annotations

import argparse
import random
import string
import time
from typing import Any

if __name__ == "__main__":
    from benchmarks.harness import pin_threads

    pin_threads(default=2)

import numpy as np

from benchmarks.harness import RESULTS, machine_label, rows_table, utc_now, write_results
from benchmarks.late_interaction import metrics
from benchmarks.packaged_model import packaged_minilm
from benchmarks.rag_retrieval import load_rag_tier

PUNCTUATION = set(string.punctuation)


def encode_tier(documents, encoder) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Each document's token views, whether each is a special token, and whether it is punctuation."""
    texts = [f"{d.meta['title']}\n{d.content}" if d.meta.get("title") else d.content for d in documents]
    out = []
    for text, encoded in zip(texts, encoder.encode_documents(texts, batch_size=16, progress_bar=True), strict=True):
        special = np.array([s is None for s in encoded.spans])
        punct = np.array([s is not None and set(text[s[0] : s[1]]) <= PUNCTUATION for s in encoded.spans])
        out.append((encoded.views, special, punct))
    return out


def rank(queries: list[np.ndarray], views: np.ndarray, owner: np.ndarray, n_docs: int, k: int = 20) -> list[list]:
    """Each query's top-``k`` document indices by exact MaxSim over ``views`` (rows) owned by ``owner``."""
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    docs = owner[starts]
    out = []
    for q in queries:
        best = np.maximum.reduceat(views @ q.T, starts, axis=0).sum(axis=1)
        scores = np.full(n_docs, -np.inf, dtype=np.float32)
        scores[docs] = best
        out.append(np.argsort(-scores, kind="stable")[:k].tolist())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", default="squad-mv", choices=("squad-mv", "pages"))
    parser.add_argument("--questions", type=int, default=600)
    parser.add_argument("--windows", default="256,128", help="document window lengths to try, in tokens")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import torch

    from haystack_mvr.modeling.late_interaction import LateInteractionEncoder

    torch.set_num_threads(args.threads)
    tier = load_rag_tier(args.tier, split="train")
    ids = [d.id for d in tier.documents]
    index = {doc_id: i for i, doc_id in enumerate(ids)}
    asked = random.Random(0).sample(tier.questions, min(args.questions, len(tier.questions)))
    gold = [index[q.positive_id] for q in asked]
    minilm = packaged_minilm()
    plain = LateInteractionEncoder.tokens(minilm)
    expanded = LateInteractionEncoder.tokens(minilm, query_expansion=32)
    query_sets = {
        "off": plain.query_views([q.question for q in asked]),
        "[MASK] to 32": expanded.query_views([q.question for q in asked]),
    }
    rows: list[dict[str, Any]] = []
    for window in [int(w) for w in args.windows.split(",")]:
        start = time.perf_counter()
        encoded = encode_tier(tier.documents, LateInteractionEncoder.tokens(minilm, doc_max_length=window))
        seconds = time.perf_counter() - start
        views = np.concatenate([v for v, _, _ in encoded])
        owner = np.concatenate([np.full(len(v), i) for i, (v, _, _) in enumerate(encoded)])
        special = np.concatenate([s for _, s, _ in encoded])
        punct = np.concatenate([p for _, _, p in encoded])
        keeps = {
            "every token": np.ones(len(views), bool),
            "no [CLS]/[SEP]": ~special,
            "no punctuation": ~punct,
            "neither": ~special & ~punct,
        }
        for keep_name, keep in keeps.items():
            for expansion, queries in query_sets.items():
                if expansion != "off" and keep_name not in ("every token", "no punctuation"):
                    continue
                ranked = rank(queries, views[keep], owner[keep], len(ids))
                rows.append(
                    {
                        "convention": f"window {window}, {keep_name}, query expansion {expansion}",
                        **metrics([[ids[i] for i in r] for r in ranked], [ids[g] for g in gold]),
                        "views_per_document": round(int(keep.sum()) / len(ids), 1),
                        "encode_seconds": round(seconds, 1),
                    }
                )
                print(rows[-1], flush=True)
    payload = {
        "command": f"python -m benchmarks.token_view_conventions --tier {args.tier} --questions {args.questions} "
        f"--windows {args.windows} --threads {args.threads}",
        "tier": args.tier,
        "split": "train (never dev)",
        "documents": len(ids),
        "questions": len(asked),
        "machine": machine_label(threads=args.threads),
        "date": utc_now(),
        "rows": rows,
    }
    lines = [
        f"# Token-view conventions: {args.tier} ({len(ids)} documents, {len(asked)} training questions)",
        "",
        f"`{payload['command']}`. {payload['machine']}, {payload['date']}. The packaged all-MiniLM-L6-v2's final "
        "hidden states, L2-normalised, exact MaxSim over every document; gold R@k and MRR@10 on a seeded sample of "
        "TRAINING questions (the default is chosen here, never on dev).",
        "",
        *rows_table(rows, "convention", ["R@1", "R@5", "R@20", "MRR@10", "views_per_document", "encode_seconds"]),
    ]
    write_results(RESULTS / f"token_view_conventions.{args.tier}", payload, markdown="\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
