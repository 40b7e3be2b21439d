"""Training examples for the generative reader: each training question with the context the pipeline builds for it.

    python -m benchmarks.rag_retrieval --tier squad-mv --split train
    python -m benchmarks.rag_context --tier squad-mv --split train --budgets 128 256 512 --no-results
    python -m benchmarks.generative_examples runs/rag/generative-examples.jsonl.gz

Each squad-mv training question (training articles only, never a dev article) gets, at each budget, the pieces
``MultiViewContextBuilder`` built from the hybrid's top 10 paragraphs (benchmarks/rag_context.py's ``builder after
hybrid`` row), as the reader will read them at answer time. Gold ensured: when the answer is not in the pieces, the
gold paragraph's text around the answer (a quarter of the budget, at least 48 tokens) replaces the lowest-scored
pieces it needs room for, at a random position (seed 0), so that every example can be answered from its context.
Lines: ``{"id", "question", "passages": [str, ...], "answer"}`` (``haystack-mvr train-reader --kind generative
--examples-file``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from pathlib import Path

from benchmarks.rag_context import TokenCounter
from benchmarks.rag_retrieval import CACHE, load_rag_tier
from haystack_mvr.evaluation.answer_matching import has_answer

ROW = "builder after hybrid"


def gold_window(question, text: str, budget: int, counter: TokenCounter) -> str:
    start = question.answer_starts[0] if question.answer_starts else max(text.find(question.answers[0]), 0)
    lo, hi = counter.window(text, start, max(48, budget // 4))
    return text[lo:hi]


def ensured(question, pieces: list[str], gold: str, budget: int, counter: TokenCounter, rng: random.Random):
    """``pieces`` (best first) with ``gold`` put in at a random place, dropping the last pieces it needs room for."""
    if has_answer(question.answers, "\n\n".join(pieces)):
        return pieces, False
    room = budget - counter.count(gold)
    kept, used = [], 0
    for piece in pieces:
        n = counter.count(piece)
        if used + n > room:
            break
        kept.append(piece)
        used += n
    kept.insert(rng.randint(0, len(kept)), gold)
    return kept, True


def write_examples(cache: Path, path: Path, budgets=(128, 256, 512)) -> dict:
    from benchmarks.packaged_model import packaged_minilm

    tier = load_rag_tier("squad-mv", "train")
    saved = json.loads((cache / "contexts-train.json").read_text(encoding="utf-8"))
    texts = {d.id: d.content for d in tier.documents}
    by_id = {q.id: q for q in tier.questions}
    counter = TokenCounter(packaged_minilm())
    rng = random.Random(0)
    count = inserted = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for qid, contexts in zip(saved["question_ids"], saved["contexts"], strict=True):
            question = by_id[qid]
            for budget in budgets:
                pieces = [texts[d][s:e] for d, s, e in contexts[ROW][str(budget)]]
                gold = gold_window(question, texts[question.positive_id], budget, counter)
                pieces, added = ensured(question, pieces, gold, budget, counter, rng)
                line = {"id": f"{qid}@{budget}", "question": question.question, "passages": pieces}
                f.write(json.dumps({**line, "answer": question.answers[0]}) + "\n")
                count += 1
                inserted += added
    summary = {"examples": count, "gold_inserted": inserted, "budgets": list(budgets)}
    print(f"wrote {path}: {summary}")
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", type=Path)
    parser.add_argument("--budgets", type=int, nargs="+", default=[128, 256, 512])
    parser.add_argument("--cache-dir", type=Path, default=CACHE)
    args = parser.parse_args()
    write_examples(args.cache_dir / "squad-mv", args.output, args.budgets)


if __name__ == "__main__":
    main()
