"""
Train an extractive (span) reader on squad-mv with transformers' ``Trainer``.

The backbone (a BERT-like encoder such as all-MiniLM-L6-v2) gets a fresh span head
(``AutoModelForQuestionAnswering``); each training question is paired with its gold paragraph, tokenized as
``(question, paragraph)`` in windows of ``max_length`` tokens overlapping by ``stride``, and the start / end token of
the first answer is the label (``[CLS]``, position 0, for a window without the answer). The saved folder loads in
Haystack's ``TransformersExtractiveReader(model=folder)``.

With a retrieved file (``--retrieved-file``) each question instead reads ``k`` passages at once, its retrieved ones
with the gold paragraph ensured, and the span softmax is shared across them (``shared_normalization``): the reader
learns to rank spans across the passages a pipeline hands it. Questions of ``DEV_ARTICLES`` are never trained on.
``token_type_ids`` are left out on purpose: Haystack's reader calls the model with ``input_ids`` and
``attention_mask`` only, so the model is trained the way it will be run.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoModelForQuestionAnswering,
    AutoTokenizer,
    DataCollatorWithPadding,
    PreTrainedTokenizerBase,
    Trainer,
    set_seed,
)

from haystack_mvr.datasets import Question, load_corpus, load_questions, split_by_article
from haystack_mvr.readers.training.arguments import ReaderTrainingArguments
from haystack_mvr.readers.training.retrieved_passages import read_retrieved
from haystack_mvr.readers.training.shared_normalization import (
    SharedNormalizationCollator,
    SharedNormalizationTrainer,
    shared_normalization_examples,
)
from haystack_mvr.readers.training.trainer_setup import train_and_save, trainer_settings

__all__ = ["extractive_features", "train_extractive_reader", "training_questions"]

logger = logging.getLogger(__name__)


def training_questions(data_dir: Path, limit: int | None = None) -> tuple[list[Question], dict[str, Any]]:
    """
    The squad-mv training questions outside ``DEV_ARTICLES`` (first ``limit`` of them) and the corpus by id.

    :returns: ``(questions, passages)``; ``passages`` maps a corpus id to its ``Passage``.
    """
    questions, _dev = split_by_article(load_questions(data_dir / "train.jsonl"))
    passages = {p.id: p for p in load_corpus(data_dir / "corpus.jsonl")}
    missing = sorted({q.positive_id for q in questions} - set(passages))
    if missing:
        msg = f"{len(missing)} positive ids are not in {data_dir / 'corpus.jsonl'}, e.g. {missing[0]!r}."
        raise ValueError(msg)
    return (questions[:limit] if limit else questions), passages


def extractive_features(
    tokenizer: PreTrainedTokenizerBase,
    questions: list[str],
    contexts: list[str],
    answer_starts: list[int],
    answers: list[str],
    *,
    max_length: int,
    stride: int,
) -> list[dict[str, list[int] | int]]:
    """
    Tokenized windows with span labels (the standard SQuAD recipe, by character offsets).

    :param questions: ``n`` questions.
    :param contexts: ``n`` passages, paired with the questions.
    :param answer_starts: ``n`` character offsets of the answer in its passage.
    :param answers: ``n`` answer strings.
    :returns: One dict per window: ``input_ids``, ``attention_mask``, ``start_positions``, ``end_positions``
        (token indices; ``0`` when the window does not hold the whole answer).
    """
    encoded = tokenizer(
        questions,
        contexts,
        truncation="only_second",
        max_length=max_length,
        stride=stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
    )
    features = []
    for i, offsets in enumerate(encoded["offset_mapping"]):
        sample = encoded["overflow_to_sample_mapping"][i]
        start_char = answer_starts[sample]
        end_char = start_char + len(answers[sample])
        sequence_ids = encoded.sequence_ids(i)
        context_tokens = [t for t, s in enumerate(sequence_ids) if s == 1]
        start = end = 0
        first, last = context_tokens[0], context_tokens[-1]
        if offsets[first][0] <= start_char and offsets[last][1] >= end_char:
            start = next(t for t in context_tokens if offsets[t][1] > start_char)
            end = next(t for t in reversed(context_tokens) if offsets[t][0] < end_char)
        features.append(
            {
                "input_ids": encoded["input_ids"][i],
                "attention_mask": encoded["attention_mask"][i],
                "start_positions": start,
                "end_positions": end,
            }
        )
    return features


def _answer_offset(question: Question, text: str) -> tuple[str, int] | None:
    """The first answer whose recorded offset points at it in ``text`` (or that occurs in it)."""
    for answer, start in zip(question.answers, question.answer_starts, strict=False):
        if text[start : start + len(answer)] == answer:
            return answer, start
    for answer in question.answers:
        start = text.find(answer)
        if answer and start >= 0:
            return answer, start
    return None


def train_extractive_reader(args: ReaderTrainingArguments) -> dict[str, Any]:
    """
    Fine-tune ``args.model`` with a span head on the squad-mv training questions; save to ``args.output_dir``.

    :returns: A summary (steps, seconds, examples), also written to ``output_dir/reader_training.json``.
    """
    if args.threads:
        torch.set_num_threads(args.threads)
    set_seed(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForQuestionAnswering.from_pretrained(args.model)

    questions, passages = training_questions(args.data_dir, args.limit)
    training_args, budget = trainer_settings(args)
    if args.retrieved_file:
        examples = shared_normalization_examples(
            tokenizer,
            questions,
            passages,
            read_retrieved(args.retrieved_file),
            args.num_passages,
            max_length=args.max_length,
            stride=args.stride,
            answer_offset=_answer_offset,
        )
        random.Random(args.seed).shuffle(examples)
        logger.info("extractive reader, shared normalization: %d questions", len(examples))
        trainer: Trainer = SharedNormalizationTrainer(
            model=model,
            args=training_args,
            train_dataset=examples,
            callbacks=budget,
            data_collator=SharedNormalizationCollator(tokenizer, args.num_passages),
        )
        details = {
            "kind": "extractive",
            "backbone": args.model,
            "questions": len(examples),
            "windows": sum(len(e["windows"]) for e in examples),
            "num_passages": args.num_passages,
            "retrieved_file": str(args.retrieved_file),
            "loss": "shared normalization",
        }
        return train_and_save(trainer, tokenizer, args, budget, details)

    rows = [(q, _answer_offset(q, passages[q.positive_id].text)) for q in questions]
    rows = [(q, found) for q, found in rows if found is not None]
    features = extractive_features(
        tokenizer,
        [q.question for q, _ in rows],
        [passages[q.positive_id].text for q, _ in rows],
        [start for _, (_, start) in rows],
        [answer for _, (answer, _) in rows],
        max_length=args.max_length,
        stride=args.stride,
    )
    logger.info("extractive reader: %d questions, %d windows", len(rows), len(features))
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=features,
        callbacks=budget,
        data_collator=DataCollatorWithPadding(tokenizer),
    )
    details = {
        "kind": "extractive",
        "backbone": args.model,
        "questions": len(rows),
        "windows": len(features),
    }
    return train_and_save(trainer, tokenizer, args, budget, details)
