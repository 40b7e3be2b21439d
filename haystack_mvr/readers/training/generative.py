"""
Train a generative RAG reader: LoRA (peft) on a small chat LM, SmolLM2-135M-Instruct by default, with transformers'
``Trainer``, on the examples and features of ``generative_data``. The model, the prompt tokens, merging and
answering live in ``haystack_mvr.readers.generative_model``.

This module never imports haystack, sentence-transformers, datasets or bm25s (the GPU machines that train the reader
have none of them): torch, transformers, peft, jinja2 and the standard library only. A test keeps it so.
"""

from __future__ import annotations

import json
import logging
import random
import time
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import TrainerCallback, TrainingArguments, set_seed

from haystack_mvr.readers.generative_model import (
    ADAPTER_WEIGHTS,
    cpu_bf16,
    end_of_turn_id,
    load_base,
    merge_generative_adapter,
    save_merged,
)
from haystack_mvr.readers.training.answer_token_loss import AnswerTokenTrainer
from haystack_mvr.readers.training.arguments import ReaderTrainingArguments
from haystack_mvr.readers.training.generative_data import (
    GenerativeCollator,
    checked_example,
    generative_features,
    read_examples,
    squad_mv_examples,
)
from haystack_mvr.readers.training.trainer_setup import train_and_save, trainer_settings

__all__ = [
    "LORA_TARGETS",
    "generative_trainer_settings",
    "native_bf16",
    "train_from_examples",
    "train_generative_reader",
]

logger = logging.getLogger(__name__)

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def generative_trainer_settings(args: ReaderTrainingArguments) -> tuple[TrainingArguments, list[TrainerCallback]]:
    """``trainer_settings`` for LoRA: bf16 autocast where the hardware computes in bfloat16 (CUDA with bf16, or a
    CPU whose oneDNN has native bf16 kernels: AVX512-BF16 / AMX), else float32; gradient
    accumulation, no weight decay, batches of examples of about the same length (less padding to compute)."""
    return trainer_settings(
        args,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        weight_decay=0.0,
        bf16=native_bf16(),
        train_sampling_strategy="group_by_length",
    )


def native_bf16() -> bool:
    """Whether this run's device computes bfloat16 natively (CUDA with bf16 support, or oneDNN's CPU bf16)."""
    if torch.cuda.is_available():
        return torch.cuda.is_bf16_supported()
    return cpu_bf16()


def _halve_adapter(folder: Path) -> None:
    """Store the adapter's float32 weights in bfloat16 (half the size)."""
    from safetensors.torch import load_file, save_file

    path = folder / ADAPTER_WEIGHTS
    weights = load_file(str(path))
    save_file(
        {k: v.to(torch.bfloat16) if v.dtype == torch.float32 else v for k, v in weights.items()},
        str(path),
        metadata={"format": "pt"},
    )


def train_generative_reader(
    args: ReaderTrainingArguments, examples: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """
    LoRA-train ``args.model`` (a fresh adapter, or ``args.init_adapter`` trained further) as a reader on
    ``examples`` (default: ``args.examples_file``'s, or squad-mv's gold paragraphs); save the adapter (bfloat16)
    and tokenizer to ``args.output_dir``, with ``args.merge`` also the merged model to ``output_dir/merged``.
    With ``args.merge_adapter`` only merge that adapter (:func:`merge_generative_adapter`).

    :returns: A summary, also written to ``output_dir/reader_training.json``.
    """
    if args.merge_adapter is not None:
        return merge_generative_adapter(args.merge_adapter, args.output_dir, base=args.model)
    from peft import LoraConfig, PeftModel, get_peft_model

    if args.threads:
        torch.set_num_threads(args.threads)
    set_seed(args.seed)
    if examples is not None:
        examples = [checked_example(e, f"example {n}") for n, e in enumerate(examples, 1)][: args.limit or None]
    elif args.examples_file is not None:
        examples = read_examples(args.examples_file)[: args.limit or None]
    else:
        examples = squad_mv_examples(args.data_dir, args.limit)
    random.Random(args.seed).shuffle(examples)
    model, tokenizer = load_base(args.model)
    end = end_of_turn_id(tokenizer)
    start = time.perf_counter()
    features = [
        generative_features(
            tokenizer, e["question"], e["passages"], e["answer"], max_length=args.max_length, end_id=end
        )
        for e in examples
    ]
    logger.info("generative reader: %d examples tokenized in %.1f s", len(features), time.perf_counter() - start)
    if args.init_adapter is not None:  # trained further: its own rank, alpha and targets
        peft_model = PeftModel.from_pretrained(model, str(args.init_adapter), is_trainable=True)
        for parameter in peft_model.parameters():  # a float16 adapter (the shipped one) trains in float32
            if parameter.requires_grad:
                parameter.data = parameter.data.float()
        lora = peft_model.peft_config["default"]
    else:
        lora = LoraConfig(
            r=args.lora_r,
            lora_alpha=args.lora_alpha,
            lora_dropout=args.lora_dropout,
            target_modules=list(LORA_TARGETS),
            task_type="CAUSAL_LM",
        )
        peft_model = get_peft_model(model, lora)
    peft_model.peft_config["default"].base_model_name_or_path = str(args.model)  # "smollm2", not a site-packages path
    training_args, budget = generative_trainer_settings(args)
    trainer = AnswerTokenTrainer(
        model=peft_model,
        args=training_args,
        train_dataset=features,
        data_collator=GenerativeCollator(tokenizer.pad_token_id),
        callbacks=budget,
        processing_class=tokenizer,
    )
    trainable, total = peft_model.get_nb_trainable_parameters()
    details = {
        "kind": "generative",
        "base": str(args.model),
        "examples": len(features),
        "examples_file": str(args.examples_file) if args.examples_file else None,
        "init_adapter": str(args.init_adapter) if args.init_adapter else None,
        "lora_r": lora.r,
        "lora_alpha": float(lora.lora_alpha),
        "lora_dropout": lora.lora_dropout,
        "lora_targets": sorted(lora.target_modules),
        "end_of_turn_id": end_of_turn_id(tokenizer),
        "trainable_parameters": trainable,
        "parameters": total,
        "gradient_accumulation_steps": args.gradient_accumulation_steps,
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "precision": "bf16 autocast" if training_args.bf16 else "fp32",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    summary = train_and_save(trainer, tokenizer, args, budget, details)
    _halve_adapter(args.output_dir)
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    summary.update(
        {
            "epochs": round(float(trainer.state.epoch or 0.0), 4),
            "minutes": round(summary["train_seconds"] / 60, 2),
            "final_loss": round(float(losses[-1]), 4) if losses else summary["train_loss"],
            "adapter_mb": round((args.output_dir / ADAPTER_WEIGHTS).stat().st_size / 2**20, 2),
            "merged": None,
        }
    )
    if args.merge if args.merge is not None else not torch.cuda.is_available():
        summary["merged"] = str(save_merged(peft_model, tokenizer, args.output_dir / "merged"))
    (args.output_dir / "reader_training.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def train_from_examples(
    base: str | Path,
    examples: list[dict[str, Any]],
    output_dir: str | Path,
    *,
    minutes: float | None = None,
    max_steps: int | None = None,
    **options: Any,
) -> dict[str, Any]:
    """
    :func:`train_generative_reader` on in-memory ``examples`` (``{"id", "question", "passages", "answer"}``) from
    ``base``; ``minutes`` is ``--max-minutes``, ``max_steps`` ``None`` means epochs, ``options`` are the other
    ``ReaderTrainingArguments`` fields (``epochs``, ``batch_size``, ``learning_rate``, ``max_length``, ``merge``...).
    """
    args = ReaderTrainingArguments(
        kind="generative",
        model=str(base),
        output_dir=Path(output_dir),
        max_minutes=minutes,
        max_steps=-1 if max_steps is None else max_steps,
        **options,
    )
    return train_generative_reader(args, examples)
