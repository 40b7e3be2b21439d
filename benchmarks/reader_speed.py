"""How long the generative reader takes to answer one question from the builder's context, at each precision.

    python -m benchmarks.rag_retrieval --tier squad-mv && python -m benchmarks.rag_context --tier squad-mv
    python -m benchmarks.reader_speed --tier squad-mv --threads 2 --questions 30 --rounds 3

``GenerativeReader`` (the shipped reader, or ``--reader FOLDER``) reads each question's ``builder after hybrid``
context at ``--budget`` MiniLM tokens (benchmarks/rag_context.py's dev contexts), greedy, at most 16 new tokens, one
question at a time, as a pipeline asks it. The precisions run interleaved, question by question within each round,
so that the machine's load changes them alike; torch's threads are pinned; the 1-minute load average is recorded
before and after. Reported: the median and 90th percentile seconds a question, and each precision's answers (which
``rag_answers.py`` scores against the gold answers).
"""

from __future__ import annotations

import argparse
import os

if __name__ == "__main__":  # before numpy and torch load: they size their thread pools then
    from benchmarks.harness import pin_threads

    pin_threads(default=2)

import statistics
import time
from pathlib import Path

from benchmarks.harness import RESULTS, machine_label, write_results
from benchmarks.rag_answers import passages, sampled_contexts
from benchmarks.rag_retrieval import CACHE

ROW = "builder after hybrid"
PRECISIONS = ("float32", "bfloat16", "int8")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def same(answers: list[str], reference: list[str] | None) -> int | None:
    return None if reference is None else sum(a == b for a, b in zip(answers, reference, strict=True))


def markdown(payload: dict) -> str:
    lines = [
        f"# Generative reader speed: {payload['tier']}, {payload['budget']} tokens of built context",
        "",
        f"{payload['machine']}; {payload['questions']} dev questions x {payload['rounds']} rounds, precisions "
        f"interleaved question by question; 1-minute load average {payload['load_before']} before, "
        f"{payload['load_after']} after. Reader: {payload['reader']}.",
        "",
        "| precision | median s / question | p90 | load (s) | answers equal to float32's |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, entry in payload["precisions"].items():
        lines.append(
            f"| {name} | {entry['median_s']:.3f} | {entry['p90_s']:.3f} | {entry['load_s']:.1f} | "
            f"{entry['same_as_float32']} / {payload['questions']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", default="squad-mv")
    parser.add_argument("--budget", type=int, default=256)
    parser.add_argument("--questions", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reader", default=None, help="A reader folder (default: the shipped reader).")
    parser.add_argument("--precisions", nargs="+", default=list(PRECISIONS))
    parser.add_argument("--cache-dir", type=Path, default=CACHE)
    parser.add_argument("--name", default=None)
    args = parser.parse_args()

    import torch
    from haystack import Document

    from haystack_mvr.components.readers import GenerativeReader

    torch.set_num_threads(args.threads)
    texts, questions, contexts = sampled_contexts(args.tier, args.cache_dir, args.questions)
    items = [
        (q.question, [Document(content=t) for t in passages(c[ROW][str(args.budget)], texts)])
        for q, c in zip(questions, contexts, strict=True)
    ]
    readers, load_s = {}, {}
    for precision in args.precisions:
        start = time.perf_counter()
        readers[precision] = GenerativeReader(model=args.reader, precision=precision)
        readers[precision].warm_up()
        load_s[precision] = time.perf_counter() - start
    for reader in readers.values():  # one warm-up question each
        reader.run(query=items[0][0], documents=items[0][1])
    load_before = os.getloadavg()[0]
    seconds: dict[str, list[float]] = {p: [] for p in readers}
    answers: dict[str, list[str]] = {p: [] for p in readers}
    for round_ in range(args.rounds):
        for question, docs in items:
            for precision, reader in readers.items():
                start = time.perf_counter()
                found = reader.run(query=question, documents=docs)["answers"]
                seconds[precision].append(time.perf_counter() - start)
                if round_ == 0:
                    answers[precision].append(found[0].data if found else "")
    load_after = os.getloadavg()[0]
    reference = answers.get("float32")
    payload = {
        "tier": args.tier,
        "budget": args.budget,
        "questions": len(items),
        "rounds": args.rounds,
        "reader": args.reader or "the shipped reader",
        "machine": machine_label(threads=args.threads),
        "load_before": round(load_before, 2),
        "load_after": round(load_after, 2),
        "precisions": {
            p: {
                "median_s": statistics.median(s),
                "p90_s": percentile(s, 0.9),
                "load_s": round(load_s[p], 2),
                "same_as_float32": same(answers[p], reference),
                "answers": answers[p],
            }
            for p, s in seconds.items()
        },
    }
    name = "reader_speed" + (f".{args.name}" if args.name else "")
    write_results(RESULTS / name, payload, markdown=markdown(payload))
    print(markdown(payload))


if __name__ == "__main__":
    main()
