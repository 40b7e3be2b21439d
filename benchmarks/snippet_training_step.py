"""What a snippet-mode training step costs besides the model: collation, and one forward for all document columns.

    python -m benchmarks.snippet_training_step                 # the packaged all-MiniLM-L6-v2, on the CPU
    python -m benchmarks.snippet_training_step --device cuda

On the H100, snippet-mode training ran 4-5x fewer steps per second than MVR / CAMVR at the same batch. Two costs
of snippet mode come before the model, and this measures both against the versions they replaced, alternately on
the same batches (median of --repeats, after a warm-up):

1. **Collation** (runs on the CPU in the DataLoader, between GPU steps when ``num_workers`` is 0): tokenizing a
   batch of ``(query, positive, negative)`` rows and finding each document's sentence token ranges. The replaced
   version asked the tokenizer for ``return_offsets_mapping``, which converts the offsets to a tensor through
   Python lists; the current one reads them from the fast tokenizer's encodings. MVR and CAMVR are timed beside it.
2. **Document forwards**: sentence-transformers' losses embed all document columns in one forward pass when their
   features concatenate. The replaced version kept the sentence ranges in a list, which the columns disagree on,
   so each column had its own pass (as ``column_merging_disabled()`` forces here); now they are a padded tensor.
   The loss's forward and backward over real squad-mv rows, both ways; the loss is checked equal (no dropout).

Writes benchmarks/results/snippet_training_step.{json,md} (``--output-dir`` elsewhere).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import types
from bisect import bisect_left
from pathlib import Path

import torch
from sentence_transformers.base.losses.merged_forward import column_merging_disabled
from sentence_transformers.base.modules import Transformer

from benchmarks.harness import RESULTS, alternate, machine_label, write_results
from benchmarks.packaged_model import packaged_minilm
from haystack_mvr.modeling import st_modules
from haystack_mvr.modeling.sentence_splitting import sentence_spans
from haystack_mvr.training.data_collator import MultiViewDataCollator
from haystack_mvr.training.losses import MultiViewGlobalLocalLoss

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "squad-mv"


def offsets_mapping_preprocess(self, inputs, prompt=None, processing_kwargs=None, **kwargs):
    """The replaced ``SnippetTransformer.preprocess``: offsets through ``return_offsets_mapping``, lists out."""
    if kwargs.get("task") == "query" or not all(isinstance(text, str) for text in inputs):
        return Transformer.preprocess(self, inputs, prompt=prompt, processing_kwargs=processing_kwargs, **kwargs)
    processing = dict(processing_kwargs or {})
    processing["text"] = {**processing.get("text", {}), "return_offsets_mapping": True}
    features = Transformer.preprocess(self, inputs, prompt=prompt, processing_kwargs=processing, **kwargs)
    offsets = features.pop("offset_mapping").tolist()
    tokenizer = self.tokenizer
    sentences = []
    for text, ids, mask, row in zip(
        inputs, features["input_ids"].tolist(), features["attention_mask"].tolist(), offsets, strict=True
    ):
        text = (prompt or "") + text
        length = int(sum(mask))
        first = 1 if length and ids[0] == tokenizer.cls_token_id else 0
        last = length - 1 if length and ids[length - 1] == tokenizer.sep_token_id else length
        starts = [o[0] for o in row[first:last]]
        sentences.append(
            [(s, e, first + bisect_left(starts, s), first + bisect_left(starts, e)) for s, e in sentence_spans(text)]
        )
    features[st_modules.SENTENCES] = sentences
    return features


def squad_rows(data: Path, count: int, seed: int = 0) -> list[dict[str, str]]:
    """``count`` training rows: a squad-mv question, its paragraph and a random other paragraph."""
    corpus = {}
    with (data / "corpus.jsonl").open(encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            corpus[record["id"]] = record["text"]
    with (data / "train.jsonl").open(encoding="utf-8") as f:
        questions = [json.loads(line) for line in f]
    rng = random.Random(seed)
    ids = list(corpus)
    rows = []
    for q in rng.sample(questions, count):
        negative = rng.choice([i for i in rng.sample(ids, 3) if i != q["positive_id"]])
        rows.append({"query": q["question"], "positive": corpus[q["positive_id"]], "negative_1": corpus[negative]})
    return rows


def table(runs: dict[str, list[float]], baseline: str | None) -> list[str]:
    lines = ["| version | ms | p10-p90 ms | vs the replaced |", "|---|---:|---:|---:|"]
    base = statistics.median(runs[baseline]) if baseline else None
    for name, times in runs.items():
        median = statistics.median(times)
        q = statistics.quantiles(times, n=10) if len(times) > 1 else [median, median]
        ratio = f"{base / median:.2f}x" if base else ""
        lines.append(f"| {name} | {1000 * median:.1f} | {1000 * q[0]:.1f}-{1000 * q[-1]:.1f} | {ratio} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="Backbone (default: the packaged all-MiniLM-L6-v2).")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--data-dir", type=Path, default=DATA)
    parser.add_argument("--collate-batch", type=int, default=128, help="Rows per collated batch (the H100 runs').")
    parser.add_argument("--step-batch", type=int, default=16, help="Rows per timed forward + backward.")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    backbone = args.model or packaged_minilm()
    rows = squad_rows(args.data_dir, args.collate_batch)

    snippet = st_modules.snippet_encoder(backbone, num_snippets=8, device=args.device)
    replaced = st_modules.snippet_encoder(backbone, num_snippets=8, device=args.device)
    replaced[0].preprocess = types.MethodType(offsets_mapping_preprocess, replaced[0])
    viewers = {
        "mvr": st_modules.viewer_encoder(backbone, mode="mvr", views=8, viewer_position=1, device=args.device),
        "camvr": st_modules.viewer_encoder(backbone, mode="camvr", views=8, device=args.device),
    }

    def collate_with(model):
        collator = MultiViewDataCollator(preprocess_fn=model.preprocess)
        return lambda: collator(rows)

    collate = alternate(
        {
            "snippet, offsets through return_offsets_mapping (replaced)": collate_with(replaced),
            "snippet, offsets from the encodings (current)": collate_with(snippet),
            "MVR k = 8 (for reference)": collate_with(viewers["mvr"]),
            "CAMVR n = 8 (for reference)": collate_with(viewers["camvr"]),
        },
        args.repeats,
        "cpu",
    )

    snippet.train()
    for module in snippet.modules():  # no dropout: both versions must give the same loss
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    loss = MultiViewGlobalLocalLoss(snippet, temperature=0.05)
    batch = MultiViewDataCollator(preprocess_fn=snippet.preprocess)(rows[: args.step_batch])
    features = [
        {k[len(column) + 1 :]: v for k, v in batch.items() if k.startswith(column + "_")}
        for column in ("query", "positive", "negative_1")
    ]
    features = [
        {k: v.to(args.device) if isinstance(v, torch.Tensor) else v for k, v in f.items()} | {"task": task}
        for f, task in zip(features, ("query", "document", "document"), strict=True)
    ]
    values = {}

    def step(merged: bool):
        def run():
            snippet.zero_grad(set_to_none=True)
            if merged:
                value = sum(loss([dict(f) for f in features]).values())
            else:
                with column_merging_disabled():
                    value = sum(loss([dict(f) for f in features]).values())
            value.backward()
            values[merged] = float(value.detach())

        return run

    steps = alternate(
        {"a forward per document column (replaced)": step(False), "one forward for all columns (current)": step(True)},
        args.repeats,
        args.device,
    )
    loss_difference = abs(values[True] - values[False])
    assert loss_difference < 1e-4, loss_difference

    device = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "CPU"
    machine = machine_label(threads=args.threads, device=args.device, detail=f"torch {torch.__version__}")
    lines = [
        f"# A snippet-mode training step besides the model ({args.model or 'all-MiniLM-L6-v2, packaged'})",
        "",
        f"machine: {machine}; {args.repeats} alternating runs per version, medians.",
        "",
        f"## Collation of {args.collate_batch} squad-mv rows (query, positive, negative), on the CPU",
        "",
        *table(collate, "snippet, offsets through return_offsets_mapping (replaced)"),
        "",
        f"## The loss's forward + backward, {args.step_batch} rows, 8 snippets, on {device}",
        "",
        f"Both give the same loss (|difference| {loss_difference:.1e}, dropout off).",
        "",
        *table(steps, "a forward per document column (replaced)"),
    ]
    payload = {
        "machine": machine,
        "model": backbone,
        "collate_batch": args.collate_batch,
        "step_batch": args.step_batch,
        "loss_difference": loss_difference,
        "collate_seconds": collate,
        "step_seconds": steps,
    }
    write_results(args.output_dir / "snippet_training_step", payload, markdown="\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
