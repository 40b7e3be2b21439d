"""The transformers ``Trainer`` settings both reader trainings share."""

from __future__ import annotations

import torch
from transformers import TrainerCallback, TrainingArguments

from haystack_mvr.training.readers.arguments import ReaderTrainingArguments
from haystack_mvr.training.readers.budget_callback import WallClockBudgetCallback


def trainer_settings(args: ReaderTrainingArguments) -> tuple[TrainingArguments, list[TrainerCallback]]:
    """``TrainingArguments`` from a reader run's arguments (no checkpoints mid-run), and its wall-clock budget."""
    training_args = TrainingArguments(
        output_dir=str(args.output_dir / "trainer"),
        num_train_epochs=args.epochs,
        max_steps=args.max_steps,
        per_device_train_batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        warmup_steps=0.1,  # a fraction of the steps
        weight_decay=0.01,
        logging_steps=args.logging_steps,
        save_strategy="no",
        report_to="none",
        seed=args.seed,
        use_cpu=not torch.cuda.is_available(),
        dataloader_num_workers=0,
        remove_unused_columns=False,
    )
    budget: list[TrainerCallback] = [WallClockBudgetCallback(args.max_minutes)] if args.max_minutes else []
    return training_args, budget
