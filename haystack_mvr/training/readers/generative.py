"""
Train a generative RAG reader: LoRA (peft) on a small chat LM, SmolLM2-135M-Instruct by default, with transformers'
``Trainer``.

Each example is a chat: the user message ``GENERATIVE_READER_TEMPLATE`` renders (the question and its numbered
passages), then the answer as the assistant's turn, closed by the chat template's end-of-turn token. Only the answer
and that token are labels; the passages (never the question or the answer) are cut to fit ``max_length`` tokens
(:func:`~haystack_mvr.readers.generative_model.fit_passages`, the same cut the reader makes when it answers). The
model, the prompt tokens, merging and answering live in ``haystack_mvr.readers.generative_model`` (re-exported here).

This module never imports haystack, sentence-transformers, datasets or bm25s (the GPU machines that train it have
none of them): torch, transformers, peft, jinja2 and the standard library only. A test keeps it so.
"""

from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import transformers
from torch import Tensor
from transformers import PreTrainedTokenizerBase, Trainer, TrainerCallback, TrainingArguments, set_seed

from haystack_mvr.modeling.generative_prompt import GENERATIVE_READER_TEMPLATE, reader_messages  # noqa: F401 (re-exported)
from haystack_mvr.readers.generative_model import (  # re-exported: the training API names them
    ADAPTER_WEIGHTS,
    _fit,
    cpu_bf16,
    end_of_turn_id,
    fit_passages,
    generate_answers,
    load_base,
    load_generative_reader,
    merge_generative_adapter,
    prompt_ids,
    save_merged,
)
from haystack_mvr.training.readers.arguments import ReaderTrainingArguments
from haystack_mvr.training.readers.trainer_setup import train_and_save, trainer_settings

__all__ = [
    "LORA_TARGETS",
    "GenerativeCollator",
    "checked_example",
    "end_of_turn_id",
    "fit_passages",
    "generate_answers",
    "generative_features",
    "load_base",
    "load_generative_reader",
    "merge_generative_adapter",
    "native_bf16",
    "prompt_ids",
    "read_examples",
    "save_merged",
    "squad_mv_examples",
    "train_from_examples",
    "train_generative_reader",
]

logger = logging.getLogger(__name__)

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


# ---------------------------------------------------------------------------------------------------- examples


def checked_example(record: Any, where: str = "an example") -> dict[str, Any]:
    """``record`` as a training example ``{"id", "question", "passages": [text, ...], "answer"}``, or a
    ``ValueError`` naming ``where`` (an ``id`` is optional)."""
    record = record if isinstance(record, dict) else {}
    passages = record.get("passages")
    answer = record.get("answer")
    if (
        not isinstance(record.get("question"), str)
        or not isinstance(answer, str)
        or not answer.strip()
        or not isinstance(passages, list)
        or not all(isinstance(p, str) for p in passages)
    ):
        msg = f"{where}: each example needs 'question', a non-empty 'answer' and 'passages', a list of texts."
        raise ValueError(msg)
    return {
        "id": str(record.get("id", "")),
        "question": record["question"],
        "passages": passages,
        "answer": record["answer"],
    }


def read_examples(path: str | Path) -> list[dict[str, Any]]:
    """
    A JSONL of training examples, one ``{"id", "question", "passages": [text, ...], "answer"}`` per line (the
    passages a retriever handed the question, best first, the gold one ensured); a bad line (not JSON, not an object,
    not UTF-8, a field missing) is a ``ValueError`` naming the file and the line, an empty file one naming the file.
    """
    from haystack_mvr.datasets.jsonl import read_jsonl

    examples = [
        checked_example({"id": where.rpartition(":")[2], **record}, where) for where, record in read_jsonl(path)
    ]
    if not examples:
        msg = f"{path}: no examples (an empty file)."
        raise ValueError(msg)
    return examples


def squad_mv_examples(data_dir: str | Path, limit: int | None = None) -> list[dict[str, Any]]:
    """The squad-mv training questions (``DEV_ARTICLES`` left out), each with its gold paragraph as its one
    passage and its first answer."""
    from haystack_mvr.training.readers.extractive import training_questions

    questions, passages = training_questions(Path(data_dir), limit)
    return [
        {"id": q.id, "question": q.question, "passages": [passages[q.positive_id].text], "answer": q.answers[0]}
        for q in questions
        if q.answers
    ]


def generative_features(
    tokenizer: PreTrainedTokenizerBase,
    question: str,
    passages: list[str],
    answer: str,
    *,
    max_length: int,
    end_id: int | None = None,
) -> dict[str, list[int]]:
    """
    One example's ``input_ids`` (prompt, answer, end-of-turn token) and ``labels`` (``-100`` on the prompt), the
    passages cut so that the whole fits ``max_length`` tokens (:func:`fit_passages`).

    :param end_id: The end-of-turn token (:func:`end_of_turn_id`, computed when ``None``).
    """
    end = end_of_turn_id(tokenizer) if end_id is None else end_id
    answer_ids = [*tokenizer(answer.strip(), add_special_tokens=False)["input_ids"], end]
    room = max_length - len(answer_ids) - len(prompt_ids(tokenizer, question, [""] * len(passages)))
    if passages and room <= 0:
        msg = (
            f"--max-length {max_length} leaves no room for the passages of the question {question[:80]!r} (its "
            f"prompt without passages and its answer take {max_length - room} tokens): raise --max-length."
        )
        raise ValueError(msg)
    prompt = _fit(tokenizer, question, passages, max_length - len(answer_ids))[1]
    return {"input_ids": prompt + answer_ids, "labels": [-100] * len(prompt) + answer_ids}


@dataclass
class GenerativeCollator:
    """Right-pads ``generative_features``: ``input_ids`` (``pad_token_id``), ``attention_mask``, ``labels``
    (``-100``)."""

    pad_token_id: int

    def __call__(self, batch: list[dict[str, list[int]]]) -> dict[str, Tensor]:
        width = max(len(e["input_ids"]) for e in batch)
        ids = torch.full((len(batch), width), self.pad_token_id, dtype=torch.long)
        labels = torch.full((len(batch), width), -100, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, example in enumerate(batch):
            n = len(example["input_ids"])
            ids[i, :n] = torch.tensor(example["input_ids"])
            labels[i, :n] = torch.tensor(example["labels"])
            mask[i, :n] = 1
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}


# ---------------------------------------------------------------------------------------------------- training


def generative_trainer_settings(args: ReaderTrainingArguments) -> tuple[TrainingArguments, list[TrainerCallback]]:
    """``trainer_settings`` for LoRA: bf16 autocast where the hardware computes in bfloat16 (CUDA with bf16, or a
    CPU whose oneDNN has native bf16 kernels: AVX512-BF16 / AMX, about 3x float32's speed), else float32; gradient
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
    """Store the adapter's float32 weights in bfloat16 (half the size: SmolLM2's r=16 adapter is ~10 MB, not 20)."""
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
    LoRA-train ``args.model`` as a reader on ``examples`` (default: ``args.examples_file``'s, or squad-mv's gold
    paragraphs); save the adapter (bfloat16) and tokenizer to ``args.output_dir``, with ``args.merge`` also the
    merged model to ``output_dir/merged``. With ``args.merge_adapter`` only merge that adapter
    (:func:`merge_generative_adapter`).

    :returns: A summary, also written to ``output_dir/reader_training.json``.
    """
    if args.merge_adapter is not None:
        return merge_generative_adapter(args.merge_adapter, args.output_dir, base=args.model)
    from peft import LoraConfig, get_peft_model

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
    trainer = Trainer(
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
        "lora_r": args.lora_r,
        "lora_alpha": args.lora_alpha,
        "lora_dropout": args.lora_dropout,
        "lora_targets": list(LORA_TARGETS),
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
