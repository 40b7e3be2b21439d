"""Training examples for the generative reader: each training question with the context the pipeline builds for it.

    python -m benchmarks.rag_retrieval --tier squad-mv --split train
    python -m benchmarks.rag_context --tier squad-mv --split train --budgets 128 256 512 --no-results
    python -m benchmarks.generative_examples .gpu/generative-examples.json.gz

Each squad-mv training question (training articles only, never a dev article) gets, at each budget, the pieces
``MultiViewContextBuilder`` built from the hybrid's top 10 paragraphs (benchmarks/rag_context.py's ``builder after
hybrid`` row), as the reader will read them at answer time. Gold ensured: when the answer is not in the pieces, the
gold paragraph's text around the answer (a quarter of the budget, at least 48 tokens) replaces the lowest-scored
pieces it needs room for, at a random position (seed 0), so that every example can be answered from its context.
The file keeps passages as spans into the paragraphs it names (``expand`` gives the reader's ``{"id", "question",
"passages", "answer"}`` examples; ``--jsonl`` writes those lines for ``haystack-mvr train-reader --kind generative
--examples-file``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from pathlib import Path

from benchmarks.rag_context import TokenBudgetCounter
from benchmarks.rag_retrieval import CACHE, load_rag_tier
from haystack_mvr.evaluation.answer_matching import has_answer

ROW = "builder after hybrid"


def gold_window(question, text: str, budget: int, counter: TokenBudgetCounter) -> tuple[int, int]:
    start = question.answer_starts[0] if question.answer_starts else max(text.find(question.answers[0]), 0)
    return counter.window(text, start, max(48, budget // 4))


def ensured(question, spans: list, gold: list, budget: int, texts: dict[str, str], counter, rng: random.Random):
    """``spans`` (best first) with the ``gold`` span put in at a random place, dropping the last spans it needs room
    for, when the answer is not in them already."""
    if has_answer(question.answers, "\n\n".join(texts[d][s:e] for d, s, e in spans)):
        return spans, False
    room = budget - counter.count(texts[gold[0]][gold[1] : gold[2]])
    kept, used = [], 0
    for d, s, e in spans:
        n = counter.count(texts[d][s:e])
        if used + n > room:
            break
        kept.append([d, s, e])
        used += n
    kept.insert(rng.randint(0, len(kept)), gold)
    return kept, True


def write_examples(cache: Path, path: Path, budgets=(128, 256, 512), one_budget_each: bool = False) -> dict:
    """Write ``{"documents": {id: text}, "examples": [{"id", "question", "answer", "spans"}]}`` (gzipped JSON):
    passages as ``[document id, start, end]`` spans, which keeps the file small enough to travel to a GPU;
    :func:`expand` turns it into the reader's ``{"id", "question", "passages", "answer"}`` examples.
    ``one_budget_each``: each question once, at one of ``budgets`` drawn at random (seed 1; a CPU-sized set)."""
    from benchmarks.packaged_model import packaged_minilm

    tier = load_rag_tier("squad-mv", "train")
    saved = json.loads((cache / "contexts-train.json").read_text(encoding="utf-8"))
    texts = {d.id: d.content for d in tier.documents}
    by_id = {q.id: q for q in tier.questions}
    counter = TokenBudgetCounter(packaged_minilm())
    rng = random.Random(0)
    draw = random.Random(1)
    examples, inserted = [], 0
    for qid, contexts in zip(saved["question_ids"], saved["contexts"], strict=True):
        question = by_id[qid]
        for budget in [draw.choice(budgets)] if one_budget_each else budgets:
            gold = [question.positive_id, *gold_window(question, texts[question.positive_id], budget, counter)]
            spans, added = ensured(question, contexts[ROW][str(budget)], gold, budget, texts, counter, rng)
            examples.append(
                {"id": f"{qid}@{budget}", "question": question.question, "answer": question.answers[0], "spans": spans}
            )
            inserted += added
    used = {d for e in examples for d, _, _ in e["spans"]}
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump({"documents": {d: texts[d] for d in sorted(used)}, "examples": examples}, f)
    summary = {
        "examples": len(examples),
        "gold_inserted": inserted,
        "budgets": list(budgets),
        "one_budget_each": one_budget_each,
    }
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB): {summary}")
    return summary


def expand(payload: dict) -> list[dict]:
    """The reader's examples from :func:`write_examples`'s file."""
    texts = payload["documents"]
    return [
        {
            "id": e["id"],
            "question": e["question"],
            "passages": [texts[d][s:e_] for d, s, e_ in e["spans"]],
            "answer": e["answer"],
        }
        for e in payload["examples"]
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", type=Path)
    parser.add_argument("--budgets", type=int, nargs="+", default=[128, 256, 512])
    parser.add_argument("--cache-dir", type=Path, default=CACHE)
    parser.add_argument("--jsonl", type=Path, default=None, help="Also write the examples as train-reader lines.")
    parser.add_argument(
        "--one-budget-each", action="store_true", help="Each question once, at a budget drawn at random (CPU runs)."
    )
    args = parser.parse_args()
    write_examples(args.cache_dir / "squad-mv", args.output, args.budgets, args.one_budget_each)
    if args.jsonl:
        with gzip.open(args.output, "rt", encoding="utf-8") as f:
            examples = expand(json.load(f))
        with open(args.jsonl, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(e) + "\n" for e in examples)


if __name__ == "__main__":
    main()
