"""Query-side tuning against a frozen index (``haystack-mvr tune-queries``), measured on a tier's dev questions
against the zero-shot query encoder of the same index (issue 54).

    python -m benchmarks.query_tuning --tier squad-mv --max-steps 300
    python -m benchmarks.query_tuning --tier pages --max-steps 300
    python -m benchmarks.query_tuning --tier squad-mv --tokens --max-steps 150 --batch-size 16

The tier's index is the packaged MiniLM's Flat store (snippet views, or token views with ``--tokens``), encoded
once and cached under ``--cache-dir`` (shared with ``benchmarks.late_interaction``). The query encoder is tuned on
the tier's TRAINING questions (the training articles; on pages mapped to their page) through the same
``tune_queries`` a user calls, timed with the load average, then the README's hybrid pipeline (BM25, dense, their
convex fusion) runs every dev question with the zero-shot and the tuned query encoder over the same frozen index.
Writes ``benchmarks/results/query_tuning.<tier>[.tokens].{json,md}``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    from benchmarks.harness import pin_threads

    pin_threads(default=2)

from benchmarks.harness import RESULTS, command_line, machine_label, rows_table, utc_now, write_results
from benchmarks.late_interaction import load_tier, run_systems, store_bytes
from benchmarks.packaged_model import packaged_minilm
from benchmarks.rag_retrieval import CACHE, load_rag_tier, multi_view_store


def write_questions(path: Path, questions, keep_offsets: bool) -> Path:
    """The tuning questions as ``tune-queries`` reads them (offsets only where they index the gold text)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for q in questions:
            row: dict[str, Any] = {"question": q.question, "positive_id": q.positive_id, "answers": list(q.answers)}
            if keep_offsets:
                row["answer_starts"] = list(q.answer_starts)
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", default="squad-mv", choices=("squad-mv", "pages", "pages+20k"))
    parser.add_argument("--tokens", action="store_true", help="token views (mode='tokens') instead of snippets")
    parser.add_argument("--max-steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=2e-5)
    parser.add_argument("--negatives", type=int, default=7)
    parser.add_argument("--lora-rank", type=int, default=0)
    parser.add_argument("--no-answer-views", action="store_true")
    parser.add_argument("--max-train-questions", type=int, default=None)
    parser.add_argument("--questions", type=int, default=None, help="a seeded sample of N dev questions")
    parser.add_argument("--validation-articles", type=int, default=0, help="held out of tuning, scored: choose there")
    parser.add_argument("--cache-dir", type=Path, default=CACHE)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output-name", default=None)
    args = parser.parse_args()
    import torch

    from haystack_mvr.cli.tune_queries import tune_queries

    torch.set_num_threads(args.threads)
    tier = load_tier(args.tier)
    train = load_rag_tier(args.tier, split="train").questions[: args.max_train_questions]
    titles = sorted({q.title for q in train})
    random.Random(0).shuffle(titles)
    held_out = set(titles[: args.validation_articles])
    validation = [q for q in train if q.title in held_out]
    train = [q for q in train if q.title not in held_out]
    cache = args.cache_dir / args.tier
    minilm = packaged_minilm()
    encoder_kwargs = {"mode": "tokens"} if args.tokens else None
    folder = cache / ("tokens" if args.tokens else "multi-view")
    store, info = multi_view_store(tier, minilm, folder, encoder_kwargs=encoder_kwargs)
    encoding = (info.get("encoder") or {}).get("snippet_encoding", "late_chunking")
    label = "token views" if args.tokens else f"snippet views ({encoding})"
    variant = f"{'tokens' if args.tokens else 'snippet'}-s{args.max_steps}-b{args.batch_size}-lr{args.learning_rate}"
    variant += f"-n{args.negatives}-r{args.lora_rank}{'-noav' if args.no_answer_views else ''}-v{len(held_out)}"
    tuned = cache / "tuned-queries" / variant
    questions_file = write_questions(cache / "tuning-questions.jsonl", train, keep_offsets=args.tier == "squad-mv")
    if tuned.exists():
        shutil.rmtree(tuned)
    load_before = os.getloadavg()
    start = time.perf_counter()
    tune_queries(
        folder / "store",
        questions_file,
        tuned,
        max_steps=args.max_steps,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        negatives=args.negatives,
        lora_rank=args.lora_rank,
        answer_views=not args.no_answer_views,
        progress_bar=False,
    )
    tune_seconds = time.perf_counter() - start
    load_after = os.getloadavg()
    report = json.loads((tuned / "query_tuning.json").read_text(encoding="utf-8"))["report"]
    rows: list[dict[str, Any]] = []
    size = store_bytes(store)
    for name, model in ((f"MiniLM {label}, zero-shot query", minilm), (f"MiniLM {label}, tuned query", str(tuned))):
        kwargs = encoder_kwargs if model == minilm else None
        results = run_systems(tier, store, model, args.questions, kwargs)
        if not rows:
            rows.append({"system": "BM25 (InMemoryBM25Retriever, title + text)", **results["bm25"]})
        rows.append({"system": name, **results["dense"], **size, "pipeline_ms_median": results["ms_median"]})
        rows.append({"system": f"hybrid, convex (BM25 0.4 / dense 0.6): BM25 + {name}", **results["hybrid"]})
        if validation:
            kept = run_systems(dataclasses.replace(tier, questions=validation), store, model, None, kwargs)
            held = f"{name}, {len(validation)} questions of {len(held_out)} held-out training articles"
            rows += [{"system": held, **kept["dense"]}, {"system": f"hybrid: {held}", **kept["hybrid"]}]
        print(*rows[-4 if validation else -2 :], sep="\n", flush=True)
    command = command_line()
    payload = {
        "command": command,
        "tier": args.tier,
        "documents": len(tier.documents),
        "dev_questions": min(args.questions or len(tier.questions), len(tier.questions)),
        "tuning_questions": len(train),
        "validation_articles": sorted(held_out),
        "tuning": {
            **report,
            "wall_seconds": round(tune_seconds, 1),
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in load_after],
        },
        "machine": machine_label(threads=args.threads),
        "date": utc_now(),
        "rows": rows,
    }
    tuning = payload["tuning"]
    lines = [
        f"# Query-side tuning: {args.tier}, {label} ({payload['documents']} documents, "
        f"{payload['dev_questions']} dev questions)",
        "",
        f"`{command}`. {payload['machine']}, {payload['date']}. The index is frozen: tuned on "
        f"{len(train)} training questions ({tuning['steps']} steps of {args.batch_size}, "
        f"{tuning['answer_view_questions']} with an answer view) in {tuning['wall_seconds']} s, load average "
        f"{tuning['load_before'][0]} before, {tuning['load_after'][0]} after; loss {tuning['first_loss']} -> "
        f"{tuning['last_loss']}. Gold R@k and MRR@10 on dev; ms: the whole hybrid pipeline a question.",
        "",
        *rows_table(rows, "system", ["R@1", "R@5", "R@20", "MRR@10", "views_per_document", "pipeline_ms_median"]),
    ]
    name = args.output_name or f"{args.tier}{'.tokens' if args.tokens else ''}"
    write_results(RESULTS / f"query_tuning.{name}", payload, markdown="\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
