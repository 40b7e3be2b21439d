"""Encoding speed of snippet mode on long documents and on paragraphs (issue 31, item 5).

    python -m benchmarks.long_document_speed                       # both checks, 5 interleaved rounds, 2 threads
    python -m benchmarks.long_document_speed --before 377763e      # the paragraph check against that commit
    python -m benchmarks.long_document_speed --memory 100k,1m,10m  # peak RSS of one long document per size

1. Long documents: snippet mode's windowed encoding of squad-mv pages (consecutive paragraphs of an article joined
   into pages of about 1,000-2,000 tokens, as benchmarks/long_documents.py builds them) against
   sentence-transformers' ``SentenceTransformer.encode`` over the same tokens (each page cut at token boundaries into
   window-sized pieces, what a user who splits first would encode). Throughput in page tokens per second.
2. Paragraphs: snippet mode today against the commit ``--before`` (a git worktree, imported in a subprocess of its
   own; the two alternate, one subprocess per round), on squad-mv paragraphs with titles.

Rounds alternate the variants; each ratio is taken within a round; the table gives the median and the range.
Writes benchmarks/results/long_document_speed.{json,md}.

``--memory``: one document of each size (real text: squad-mv paragraphs, then wiki passages, joined with blank
lines up to that many characters) encoded in a fresh subprocess per size; the process's peak RSS (``VmHWM``, reset
through ``/proc/self/clear_refs`` after the model is loaded and warm) is what encoding that one document adds, with
the CPU and wall seconds it took. ``--code-root`` runs the subprocesses on another checkout's ``haystack_mvr``.
Writes benchmarks/results/long_document_memory.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.harness import REPO, RESULTS, THREAD_VARIABLES
from benchmarks.harness import pin_threads as harness_pin_threads

ENCODE_PARAGRAPHS = r"""
import json, sys, time, torch
torch.set_num_threads(int(sys.argv[2]))
texts = json.load(open(sys.argv[1]))
from haystack_mvr.components.embedders.encoder_cache import load_encoder
encoder = load_encoder(sys.argv[3], "cpu", {})
encoder.encode_documents(texts[:64], batch_size=32)
start = time.perf_counter()
encoder.encode_documents(texts, batch_size=32)
print(json.dumps({"seconds": time.perf_counter() - start}))
"""


ENCODE_ONE_DOCUMENT = r"""
import json, os, sys, time, torch
path, chars, threads, model, batch_size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
torch.set_num_threads(threads)
with open(path, encoding="utf-8") as f:
    text = f.read(chars)
from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter
encoder = MultiVectorEncoderAdapter.snippet(model, device="cpu").eval()
encoder.encode_documents([text[:20_000]], batch_size=batch_size)  # warm-up: a few windows

def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024

loaded = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # resets VmHWM to the current RSS
cpu, wall = time.process_time(), time.perf_counter()
[document] = encoder.encode_documents([text], batch_size=batch_size)
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
print(json.dumps({"chars": len(text), "rss_loaded_mb": loaded, "peak_rss_mb": status("VmHWM"),
                  "views": int(document.views.shape[0]), "cpu_seconds": cpu, "wall_seconds": wall}))
"""
SIZES = {"k": 1_000, "m": 1_000_000}


def parse_size(spec: str) -> int:
    """``100k`` -> 100,000 characters, ``1m`` -> 1,000,000, ``5000`` -> 5,000."""
    spec = spec.strip().lower()
    return int(float(spec[:-1]) * SIZES[spec[-1]]) if spec[-1] in SIZES else int(spec)


def long_text(data_dir: Path, chars: int) -> str:
    """Real text of at least ``chars`` characters: squad-mv paragraphs, then wiki passages, blank-line separated."""
    import gzip

    from haystack_mvr.datasets import load_corpus

    parts = [p.text for p in load_corpus(data_dir / "squad-mv" / "corpus.jsonl")]
    total = sum(len(p) + 2 for p in parts)
    if total < chars:
        with gzip.open(data_dir / "wiki-distractors" / "passages-200k.jsonl.gz", "rt", encoding="utf-8") as f:
            for line in f:
                parts.append(json.loads(line)["text"])
                total += len(parts[-1]) + 2
                if total >= chars:
                    break
    return "\n\n".join(parts)[:chars]


def memory_runs(model: str, data_dir: Path, sizes: list[int], threads: int, batch_size: int, code_root: Path) -> list:
    """Peak RSS of encoding one document of each size, each in a fresh subprocess."""
    path = Path("/tmp") / "long_document_memory.txt"
    path.write_text(long_text(data_dir, max(sizes)), encoding="utf-8")
    env = {**os.environ, **{k: str(threads) for k in THREAD_VARIABLES}}
    runs = []
    for chars in sizes:
        out = subprocess.run(
            [sys.executable, "-c", ENCODE_ONE_DOCUMENT, str(path), str(chars), str(threads), model, str(batch_size)],
            env={**env, "PYTHONPATH": str(code_root)},
            cwd="/tmp",
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode:  # e.g. out of memory: recorded, and the larger sizes are not tried
            error = (out.stderr.strip().splitlines() or [f"exit status {out.returncode}"])[-1]
            runs.append({"chars": chars, "error": error})
            print(json.dumps(runs[-1]), flush=True)
            break
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(runs[-1]), flush=True)
    return runs


def memory_markdown(result: dict) -> str:
    lines = [
        f"# Peak memory of one long document in snippet mode ({result['model']}, {result['threads']} threads, "
        f"batch {result['batch_size']}, code {result['code']}, {result['machine']}, {result['date']})",
        "",
        "Each size in a fresh process; peak RSS (VmHWM) reset after the model is loaded and warm, so the peak is the "
        "loaded process plus what encoding the document adds.",
        "",
        "| document chars | views | RSS loaded (MB) | peak RSS (MB) | added (MB) | CPU s | wall s |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        *(
            f"| {r['chars']:,} | {r['views']} | {r['rss_loaded_mb']:,.0f} | {r['peak_rss_mb']:,.0f} | "
            f"{r['peak_rss_mb'] - r['rss_loaded_mb']:,.0f} | {r['cpu_seconds']:,.1f} | {r['wall_seconds']:,.1f} |"
            if "error" not in r
            else f"| {r['chars']:,} | failed: {r['error']} | | | | | |"
            for r in result["runs"]
        ),
    ]
    return "\n".join(lines) + "\n"


def pin_threads(threads: int) -> None:
    harness_pin_threads(fixed=threads)
    import torch

    torch.set_num_threads(threads)


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def long_document_rounds(model: str, pages: list[str], rounds: int, batch_size: int, overlap: int | None) -> dict:
    """Snippet-mode windowed encoding vs SentenceTransformer.encode over the same tokens, alternating."""
    from sentence_transformers import SentenceTransformer

    from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter

    options = {} if overlap is None else {"window_overlap": overlap}
    ours = MultiVectorEncoderAdapter.snippet(model, device="cpu", **options).eval()
    st = SentenceTransformer(model, device="cpu")
    tokenizer = st.tokenizer
    window = ours.config.doc_max_length - 2
    pieces, tokens = [], 0
    for page in pages:
        offsets = tokenizer(page, add_special_tokens=False, return_offsets_mapping=True, verbose=False)[
            "offset_mapping"
        ]
        tokens += len(offsets)
        for begin in range(0, len(offsets), window):
            chunk = offsets[begin : begin + window]
            pieces.append(page[chunk[0][0] : chunk[-1][1]])
    piece_tokens = sum(len(tokenizer(p, add_special_tokens=False)["input_ids"]) for p in pieces)
    variants = {
        "snippet mode (windowed)": lambda: ours.encode_documents(pages, batch_size=batch_size),
        "SentenceTransformer.encode (pieces)": lambda: st.encode(pieces, batch_size=batch_size),
    }
    for fn in variants.values():  # warm-up
        fn()
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    cpu_seconds: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            start, cpu = time.perf_counter(), time.process_time()
            fn()
            seconds[name].append(time.perf_counter() - start)
            cpu_seconds[name].append(time.process_time() - cpu)
    names = list(variants)
    ratios = [b / a for a, b in zip(seconds[names[0]], seconds[names[1]], strict=True)]  # throughput ours / theirs
    cpu_ratios = [b / a for a, b in zip(cpu_seconds[names[0]], cpu_seconds[names[1]], strict=True)]
    windows = sum(len(w) for w in _windows(ours, pages))
    return {
        "pages": len(pages),
        "page_tokens": tokens,
        "st_piece_tokens": piece_tokens,
        "windows": windows,
        "window_tokens": ours.config.doc_max_length,
        "window_overlap": ours.config.window_overlap,
        "tokens_per_second": {name: spread([tokens / s for s in seconds[name]]) for name in names},
        "throughput_ratio": spread(ratios),
        "cpu_throughput_ratio": spread(cpu_ratios),
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "load_average": os.getloadavg(),
    }


def _windows(encoder, pages: list[str]) -> list[list]:
    from haystack_mvr.modeling.st_modules import WINDOWS

    transformer = encoder.model[0]
    features = transformer.preprocess(pages, task="document")
    rows = features[WINDOWS].tolist()
    out: list[list] = []
    for row in rows:
        if row[0]:
            out.append([])
        out[-1].append(row)
    return out


def paragraph_rounds(model: str, texts: list[str], rounds: int, threads: int, before: str) -> dict:
    """Today's snippet mode vs the commit ``before``, one subprocess per run, alternating."""
    worktree = Path("/tmp") / f"haystack-mvr-{before}"
    if not worktree.exists():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(worktree), before], check=True)
    corpus = Path("/tmp") / "long_document_speed_paragraphs.json"
    corpus.write_text(json.dumps(texts), encoding="utf-8")
    env = {**os.environ, **{k: str(threads) for k in THREAD_VARIABLES}}

    def run(code_root: Path) -> float:
        out = subprocess.run(
            [sys.executable, "-c", ENCODE_PARAGRAPHS, str(corpus), str(threads), model],
            env={**env, "PYTHONPATH": str(code_root)},
            cwd="/tmp",
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(out.stdout.strip().splitlines()[-1])["seconds"]

    seconds: dict[str, list[float]] = {"today": [], before: []}
    for _ in range(rounds):
        seconds["today"].append(run(REPO))
        seconds[before].append(run(worktree))
    ratios = [a / b for a, b in zip(seconds["today"], seconds[before], strict=True)]
    return {
        "paragraphs": len(texts),
        "before": before,
        "seconds": seconds,
        "time_ratio_today_over_before": spread(ratios),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="Default: the packaged all-MiniLM-L6-v2.")
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--pages", type=int, default=40, help="Long pages encoded per round.")
    parser.add_argument("--paragraphs", type=int, default=512, help="Paragraphs encoded per round.")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--before", default=None, help="A commit to compare paragraph encoding against.")
    parser.add_argument("--window-overlap", type=int, default=None, help="Default: snippet mode's own.")
    parser.add_argument("--output-name", default="long_document_speed", help="Results file name, without suffix.")
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    parser.add_argument(
        "--memory", default=None, help="Instead: peak RSS of one document per size, e.g. 100k,1m,10m (characters)."
    )
    parser.add_argument("--code-root", type=Path, default=REPO, help="--memory: the checkout whose code runs.")
    args = parser.parse_args()
    pin_threads(args.threads)
    if args.memory:
        memory_main(args)
        return
    from benchmarks.long_documents import build_pages, minilm_token_counter
    from benchmarks.packaged_model import packaged_minilm
    from haystack_mvr.datasets import load_corpus

    model = args.model or packaged_minilm()
    passages = load_corpus(args.data_dir / "squad-mv" / "corpus.jsonl")
    pages = build_pages(passages, [], minilm_token_counter(model))[: args.pages]
    page_texts = [p.text for p in pages]
    result: dict = {
        "model": Path(model).name if Path(model).exists() else model,
        "threads": args.threads,
        "batch_size": args.batch_size,
        "rounds": args.rounds,
        "machine": f"{platform.node()} ({os.cpu_count()} CPUs, {platform.processor() or platform.machine()})",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    print(f"long documents: {len(page_texts)} pages", flush=True)
    result["long_documents"] = long_document_rounds(
        model, page_texts, args.rounds, args.batch_size, args.window_overlap
    )
    print(json.dumps(result["long_documents"]["throughput_ratio"]), flush=True)
    if args.before:
        texts = [f"{p.title}\n{p.text}" for p in passages[: args.paragraphs]]
        print(f"paragraphs: {len(texts)} against {args.before}", flush=True)
        result["paragraphs"] = paragraph_rounds(model, texts, args.rounds, args.threads, args.before)
        print(json.dumps(result["paragraphs"]["time_ratio_today_over_before"]), flush=True)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / f"{args.output_name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (args.output_dir / f"{args.output_name}.md").write_text(markdown(result), encoding="utf-8")
    print(markdown(result))


def memory_main(args: argparse.Namespace) -> None:
    from benchmarks.packaged_model import packaged_minilm

    model = args.model or packaged_minilm()
    sizes = [parse_size(spec) for spec in args.memory.split(",")]
    commit = subprocess.run(
        ["git", "-C", str(args.code_root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    result = {
        "model": Path(model).name if Path(model).exists() else model,
        "threads": args.threads,
        "batch_size": args.batch_size,
        "code": commit or str(args.code_root),
        "machine": f"{platform.node()} ({os.cpu_count()} CPUs, {platform.processor() or platform.machine()})",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "runs": memory_runs(model, args.data_dir, sizes, args.threads, args.batch_size, args.code_root),
    }
    name = "long_document_memory" if args.output_name == "long_document_speed" else args.output_name
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (args.output_dir / f"{name}.md").write_text(memory_markdown(result), encoding="utf-8")
    print(memory_markdown(result))


def markdown(result: dict) -> str:
    long = result["long_documents"]
    tps = long["tokens_per_second"]
    ratio = long["throughput_ratio"]
    lines = [
        f"# Snippet-mode encoding speed ({result['model']}, {result['threads']} threads, batch {result['batch_size']}, "
        f"{result['rounds']} interleaved rounds, {result['machine']}, {result['date']})",
        "",
        f"## Long documents: {long['pages']} squad-mv pages, {long['page_tokens']:,} tokens, {long['windows']} windows "
        f"of {long['window_tokens']} tokens (window_overlap {long['window_overlap']})",
        "",
        "| encoder | page tokens/s (median) | range |",
        "|---|---:|---|",
        *(f"| {name} | {v['median']:,.0f} | {v['min']:,.0f}-{v['max']:,.0f} |" for name, v in tps.items()),
        "",
        f"Throughput ratio (snippet mode / sentence-transformers over the same {long['page_tokens']:,} tokens, "
        f"per round): **{ratio['median']:.3f}x** (range {ratio['min']:.3f}-{ratio['max']:.3f}).",
    ]
    if "cpu_throughput_ratio" in long:
        cpu = long["cpu_throughput_ratio"]
        lines += [
            "",
            f"CPU-time ratio (same, from process CPU seconds): **{cpu['median']:.3f}x** "
            f"(range {cpu['min']:.3f}-{cpu['max']:.3f}); load average "
            f"{', '.join(f'{x:.2f}' for x in long['load_average'])}.",
        ]
    if "paragraphs" in result:
        par = result["paragraphs"]
        r = par["time_ratio_today_over_before"]
        lines += [
            "",
            f"## Paragraphs: {par['paragraphs']} squad-mv paragraphs with titles, today vs {par['before']}",
            "",
            f"Encoding time ratio (today / {par['before']}, per round): **{r['median']:.3f}x** "
            f"(range {r['min']:.3f}-{r['max']:.3f}); seconds today "
            f"{', '.join(f'{s:.1f}' for s in par['seconds']['today'])}, before "
            f"{', '.join(f'{s:.1f}' for s in par['seconds'][par['before']])}.",
        ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
