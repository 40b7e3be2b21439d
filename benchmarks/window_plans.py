"""The window plan's curve (issue 41, item 1): forward-pass tokens, speed against sentence-transformers, quality.

    python -m benchmarks.window_plans --overlaps 0,4,8,16,32 --threads 1 --rounds 5
    # quality of each plan on the tuning questions (never dev), merged into this table with --tune-json:
    python -m benchmarks.long_documents --tier pages --systems multi-view --questions tune --threads 1 \\
        --encoder-kwarg window_overlap=4 --label "window_overlap=4" --output-dir /tmp/plans/4
    python -m benchmarks.window_plans --overlaps 0,4,8 --tune-json 4=/tmp/plans/4/long_documents.pages.tune.json

For each ``window_overlap`` of snippet mode's window plan (:func:`haystack_mvr.modeling.windows.plan_windows`):

1. the windows and the tokens the backbone reads for all 283 squad-mv pages (``benchmarks/long_documents.py``'s
   pages), against the window-sized pieces a user who splits first would encode with sentence-transformers (no model
   run: nearly all of the encoding time is the forward pass, so this ratio is what the speed follows);
2. the speed of snippet mode's ``encode_documents`` against ``SentenceTransformer.encode`` of those pieces on
   ``--pages`` pages: interleaved rounds in one process (every plan and sentence-transformers once a round, in
   turn), each ratio taken within a round, CPU seconds (``time.process_time``) beside wall seconds, with the range;
3. with ``--tune-json OVERLAP=PATH``: page R@1 and answer_in_snippet@1 of that plan on the tuning questions, read
   from a ``long_documents.py --questions tune`` results file.

Writes benchmarks/results/window_plans.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.harness import REPO, RESULTS
from benchmarks.long_document_speed import pin_threads, spread


def pieces_of(tokenizer, pages: list[str], capacity: int) -> list[str]:
    """Each page cut at token boundaries into pieces of ``capacity`` content tokens (the last one shorter)."""
    pieces = []
    for page in pages:
        offsets = tokenizer(page, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        offsets = offsets["offset_mapping"]
        for begin in range(0, len(offsets), capacity):
            chunk = offsets[begin : begin + capacity]
            pieces.append(page[chunk[0][0] : chunk[-1][1]])
    return pieces


def forward_tokens(encoder, pages: list[str]) -> dict[str, int]:
    """The windows and the tokens (special tokens included) the backbone reads for ``pages``."""
    transformer = encoder.model[0]
    windows = tokens = 0
    for begin in range(0, len(pages), 32):
        features = transformer.preprocess(pages[begin : begin + 32], task="document")
        windows += int(features["input_ids"].shape[0])
        tokens += int(features["attention_mask"].sum())
    return {"windows": windows, "forward_tokens": tokens}


def tune_quality(path: Path) -> dict[str, float]:
    """Page R@1 and answer_in_snippet@1 (percent) of the one multi-view row of a tune results file."""
    systems = json.loads(path.read_text(encoding="utf-8"))["systems"]
    [(label, row)] = [(k, v) for k, v in systems.items() if "answer_in_snippet@1" in v and "views_per_page" in v]
    return {
        "label": label,
        "page_R@1": 100 * row["page_R@1"],
        "answer_in_snippet@1": 100 * row["answer_in_snippet@1"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--overlaps", default="0,4,8,16,32", help="window_overlap values, comma-separated.")
    parser.add_argument("--model", default=None, help="Default: the packaged all-MiniLM-L6-v2.")
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--pages", type=int, default=40, help="Pages encoded per round for the speed.")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--tune-json", action="append", default=[], help="OVERLAP=PATH of a tune results file.")
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    args = parser.parse_args()
    pin_threads(args.threads)
    from sentence_transformers import SentenceTransformer

    from benchmarks.long_documents import build_pages, minilm_token_counter
    from benchmarks.packaged_model import packaged_minilm
    from haystack_mvr.datasets import load_corpus
    from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter

    model = args.model or packaged_minilm()
    overlaps = [int(x) for x in args.overlaps.split(",")]
    quality = {int(k): tune_quality(Path(v)) for k, v in (spec.split("=", 1) for spec in args.tune_json)}
    passages = load_corpus(args.data_dir / "squad-mv" / "corpus.jsonl")
    pages = [p.text for p in build_pages(passages, [], minilm_token_counter(model))]
    encoders = {o: MultiVectorEncoderAdapter.snippet(model, device="cpu", window_overlap=o).eval() for o in overlaps}
    st = SentenceTransformer(model, device="cpu")
    capacity = encoders[overlaps[0]].config.doc_max_length - 2
    all_pieces = pieces_of(st.tokenizer, pages, capacity)
    piece_tokens = sum(len(st.tokenizer(p)["input_ids"]) for p in all_pieces)  # with [CLS] / [SEP]
    plans = {o: forward_tokens(encoders[o], pages) for o in overlaps}
    print(json.dumps({"pieces": len(all_pieces), "piece_tokens": piece_tokens, "plans": plans}), flush=True)

    speed_pages = pages[: args.pages]
    speed_pieces = pieces_of(st.tokenizer, speed_pages, capacity)
    variants = {"sentence-transformers": lambda: st.encode(speed_pieces, batch_size=args.batch_size)}
    for o in overlaps:
        variants[f"overlap {o}"] = lambda e=encoders[o]: e.encode_documents(speed_pages, batch_size=args.batch_size)
    for fn in variants.values():  # warm-up
        fn()
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    wall: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(args.rounds):
        for name, fn in variants.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
        print(f"round {r + 1}: " + ", ".join(f"{n} {cpu[n][-1]:.1f} cpu s" for n in variants), flush=True)
    base = "sentence-transformers"
    rows = []
    for o in overlaps:
        name = f"overlap {o}"
        rows.append(
            {
                "window_overlap": o,
                **plans[o],
                "token_ratio": piece_tokens / plans[o]["forward_tokens"],
                "cpu_ratio": spread([b / a for a, b in zip(cpu[name], cpu[base], strict=True)]),
                "wall_ratio": spread([b / a for a, b in zip(wall[name], wall[base], strict=True)]),
                **({"tune": quality[o]} if o in quality else {}),
            }
        )
    result = {
        "model": Path(model).name if Path(model).exists() else model,
        "threads": args.threads,
        "batch_size": args.batch_size,
        "rounds": args.rounds,
        "speed_pages": len(speed_pages),
        "pages": len(pages),
        "pieces": len(all_pieces),
        "piece_tokens": piece_tokens,
        "machine": f"{platform.node()} ({os.cpu_count()} CPUs, {platform.processor() or platform.machine()})",
        "load_average": os.getloadavg(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "plans": rows,
        "cpu_seconds": cpu,
        "wall_seconds": wall,
    }
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "window_plans.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (args.output_dir / "window_plans.md").write_text(markdown(result), encoding="utf-8")
    print(markdown(result))


def markdown(result: dict) -> str:
    lines = [
        f"# Window plans: tokens, speed against sentence-transformers, quality ({result['model']}, "
        f"{result['threads']} threads, batch {result['batch_size']}, {result['machine']}, {result['date']})",
        "",
        f"Tokens over all {result['pages']} squad-mv pages; sentence-transformers reads {result['pieces']:,} "
        f"window-sized pieces, {result['piece_tokens']:,} tokens. Speed: {result['speed_pages']} pages, "
        f"{result['rounds']} interleaved rounds, ratio = sentence-transformers' seconds / snippet mode's per round "
        f"(median, range); load average {', '.join(f'{x:.2f}' for x in result['load_average'])}. Quality: tuning "
        "questions (training articles), `benchmarks/long_documents.py --questions tune`.",
        "",
        "| window_overlap | windows | forward tokens | token ratio | CPU-time ratio | wall ratio | page R@1 | "
        "answer_in_snippet@1 |",
        "|---:|---:|---:|---:|---|---|---:|---:|",
    ]
    for row in result["plans"]:
        c, w, q = row["cpu_ratio"], row["wall_ratio"], row.get("tune")
        lines.append(
            f"| {row['window_overlap']} | {row['windows']:,} | {row['forward_tokens']:,} | {row['token_ratio']:.3f} | "
            f"{c['median']:.3f} ({c['min']:.3f}-{c['max']:.3f}) | {w['median']:.3f} ({w['min']:.3f}-{w['max']:.3f}) | "
            + (f"{q['page_R@1']:.1f} | {q['answer_in_snippet@1']:.1f} |" if q else "- | - |")
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
