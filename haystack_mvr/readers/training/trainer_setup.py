"""The transformers ``Trainer`` settings both reader trainings share."""

from __future__ import annotations

import json
import time
from typing import Any

import torch
from transformers import Trainer, TrainerCallback, TrainingArguments

from haystack_mvr.readers.training.arguments import ReaderTrainingArguments
from haystack_mvr.readers.training.budget_callback import WallClockBudgetCallback, WallClockSaveCallback


def trainer_settings(
    args: ReaderTrainingArguments, **overrides: Any
) -> tuple[TrainingArguments, list[TrainerCallback]]:
    """``TrainingArguments`` from a reader run's arguments (checkpoints mid-run only every ``save_minutes``, the latest
    kept), and its wall-clock callbacks, the budget first; ``overrides`` replace or add ``TrainingArguments`` fields
    (e.g. the generative reader's bf16 and no decay)."""
    settings: dict[str, Any] = {
        "output_dir": str(args.output_dir / "trainer"),
        "num_train_epochs": args.epochs,
        "max_steps": args.max_steps,
        "per_device_train_batch_size": args.batch_size,
        "learning_rate": args.learning_rate,
        "warmup_steps": 0.1,  # a fraction of the steps
        "weight_decay": 0.01,
        "logging_steps": args.logging_steps,
        "save_strategy": "no",  # a WallClockSaveCallback asks for the checkpoints
        "save_total_limit": 1,
        "report_to": "none",
        "seed": args.seed,
        "use_cpu": not torch.cuda.is_available(),
        "dataloader_num_workers": 0,
        "remove_unused_columns": False,
    }
    training_args = TrainingArguments(**{**settings, **overrides})
    budget: list[TrainerCallback] = [WallClockBudgetCallback(args.max_minutes)] if args.max_minutes else []
    if args.save_minutes:
        budget.append(WallClockSaveCallback(args.save_minutes))
    return training_args, budget


def train_and_save(
    trainer: Trainer, tokenizer: Any, args: ReaderTrainingArguments, budget: list[TrainerCallback], details: dict
) -> dict[str, Any]:
    """
    Train, save the model and tokenizer in ``args.output_dir`` with a ``reader_training.json`` summary (``details``
    first, then the run's steps, time, loss and settings), and return the summary.
    """
    start = time.perf_counter()
    result = trainer.train()
    seconds = time.perf_counter() - start
    args.output_dir.mkdir(parents=True, exist_ok=True)
    trainer.save_model(str(args.output_dir))
    tokenizer.save_pretrained(str(args.output_dir))
    summary = {
        **details,
        "steps": result.global_step,
        "stopped_by_time_budget": any(getattr(c, "stopped_early", False) for c in budget),
        "train_seconds": round(seconds, 1),
        "train_loss": round(float(result.training_loss), 4),
        "batch_size": args.batch_size,
        "max_length": args.max_length,
        "learning_rate": args.learning_rate,
        "torch_threads": torch.get_num_threads(),
    }
    (args.output_dir / "reader_training.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary
