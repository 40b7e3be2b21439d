"""
Train a Fusion-in-Decoder reader (Izacard & Grave, 2021) with transformers' ``Trainer``.

A BERT-like backbone is warm-started on both sides of an ``EncoderDecoderModel`` (bert2bert: the decoder is the
backbone with causal self-attention and fresh cross-attention layers). Each training question reads ``k``
passages, the retriever's own top-k (``retrieved_file``) with the gold paragraph put in place of the last one when
the retriever missed it; every passage is encoded on its own as ``question: ... title: ... context: ...``
(``format_fid_input``), the encoder states of the ``k`` passages are concatenated (``fused_encoder_outputs``) and
the decoder is trained to generate the first answer (teacher forcing, cross-entropy). The Trainer's own loop runs
it; only ``compute_loss`` is ours. The saved folder loads in ``FusionInDecoderReader(model=folder)``.
"""

from __future__ import annotations

import json
import logging
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from transformers import (
    AutoTokenizer,
    EncoderDecoderModel,
    PreTrainedTokenizerBase,
    Trainer,
    set_seed,
)
from transformers.modeling_outputs import BaseModelOutput

from haystack_mvr.datasets import Passage, Question
from haystack_mvr.modeling.fusion_in_decoder import format_fid_input, fused_encoder_outputs
from haystack_mvr.training.readers.arguments import CROSS_ATTENTION_INITS, ReaderTrainingArguments
from haystack_mvr.training.readers.extractive import training_questions
from haystack_mvr.training.readers.retrieved_passages import passages_with_gold, read_retrieved
from haystack_mvr.training.readers.trainer_setup import train_and_save, trainer_settings

__all__ = [
    "FusionInDecoderCollator",
    "FusionInDecoderTrainer",
    "PassageStatesCollator",
    "answer_labels",
    "answer_window_text",
    "bert2bert",
    "fid_examples",
    "fresh_parameter_names",
    "passage_states",
    "train_fid_reader",
]

logger = logging.getLogger(__name__)


_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+")


def answer_window_text(text: str, answer_start: int | None, answer: str, window: int | None) -> str:
    """
    At most ``window`` characters of ``text`` that hold the answer at ``answer_start``.

    The window starts at the paragraph start when the answer ends within ``window`` characters, else at the
    earliest sentence start from which it does, else at the answer itself. ``text`` is returned whole when it is
    no longer than ``window``, when ``window`` is ``None`` or when the answer's offset is unknown.
    """
    if window is None or answer_start is None or len(text) <= window:
        return text
    end = answer_start + len(answer)
    starts = [0, *(m.end() for m in _SENTENCE_END.finditer(text, 0, answer_start + 1) if m.end() <= answer_start)]
    start = next((s for s in starts if end - s <= window), answer_start)
    return text[start : start + window]


def fid_examples(
    questions: list[Question],
    passages: dict[str, Passage],
    retrieved: dict[str, list[str]] | None,
    k: int,
    answer_window: int | None = None,
) -> list[dict[str, Any]]:
    """
    ``{"texts": k encoder inputs, "answer": str}`` per question; the gold passage is always among the ``k``.

    Without ``retrieved`` (or for a question it lacks) the question reads its gold passage alone. With
    ``answer_window`` the gold passage is cut to that many characters around its answer (``answer_window_text``).
    """
    examples = []
    for q in questions:
        ids = passages_with_gold(q, passages, retrieved, k)
        start = q.answer_starts[0] if q.answer_starts else None
        texts = [
            format_fid_input(
                q.question,
                answer_window_text(passages[i].text, start, q.answers[0], answer_window)
                if i == q.positive_id
                else passages[i].text,
                passages[i].title,
            )
            for i in ids
        ]
        examples.append({"texts": texts, "answer": q.answers[0]})
    return examples


def answer_labels(tokenizer: PreTrainedTokenizerBase, answers: list[str], max_answer_length: int) -> Tensor:
    """
    Decoder labels ``(B, T)``: each answer's tokens (at most ``max_answer_length - 1``) and the end-of-sequence token
    (``[SEP]`` for BERT), padded with ``-100``; the model prepends the decoder start token.
    """
    eos = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    tokens = [[*tokenizer(a, add_special_tokens=False)["input_ids"][: max_answer_length - 1], eos] for a in answers]
    labels = torch.full((len(tokens), max(len(t) for t in tokens)), -100, dtype=torch.long)
    for i, answer in enumerate(tokens):
        labels[i, : len(answer)] = torch.tensor(answer)
    return labels


@dataclass
class FusionInDecoderCollator:
    """
    Tokenizes a batch of ``fid_examples``: ``input_ids`` / ``attention_mask`` ``(B, k, L)``, ``labels`` ``(B, T)``
    (``answer_labels``).

    Questions with fewer than ``k`` passages get empty (fully masked) ones.
    """

    tokenizer: PreTrainedTokenizerBase
    num_passages: int
    max_length: int = 256
    max_answer_length: int = 24

    def encode(self, batch: list[dict[str, Any]]) -> dict[str, Tensor]:
        """The encoder inputs alone: ``input_ids`` / ``attention_mask`` ``(B, k, L)``."""
        texts = [
            (example["texts"] + [""] * self.num_passages)[: self.num_passages] for example in batch
        ]  # pad the passage list; empty passages are masked below
        flat = [t for row in texts for t in row]
        encoded = self.tokenizer(flat, max_length=self.max_length, truncation=True, padding=True, return_tensors="pt")
        mask = encoded["attention_mask"]
        empty = torch.tensor([t == "" for t in flat])
        mask[empty] = 0
        mask[empty, 0] = 1  # one visible [CLS] keeps the softmax of an all-empty question defined
        shape = (len(batch), self.num_passages, -1)
        return {"input_ids": encoded["input_ids"].reshape(shape), "attention_mask": mask.reshape(shape)}

    def __call__(self, batch: list[dict[str, Any]]) -> dict[str, Tensor]:
        labels = answer_labels(self.tokenizer, [e["answer"] for e in batch], self.max_answer_length)
        return {**self.encode(batch), "labels": labels}


@torch.inference_mode()
def passage_states(
    model: EncoderDecoderModel, collator: FusionInDecoderCollator, examples: list[dict[str, Any]], batch_size: int
) -> list[dict[str, Any]]:
    """
    Each example's fused encoder states, computed once (``--freeze-encoder``): ``{"states": (n, d) float16 tensor,
    "answer": str}``, ``n`` the real tokens of its passages (padding and the collator's empty passages dropped, as
    ``encode_passages`` + ``fuse_passage_states`` do at inference).
    """
    was_training = model.training
    model.eval()
    out = []
    for start in range(0, len(examples), batch_size):
        batch = examples[start : start + batch_size]
        inputs = collator.encode(batch)
        hidden, _ = fused_encoder_outputs(model, inputs["input_ids"], inputs["attention_mask"])
        keep = inputs["attention_mask"].bool()
        for i, example in enumerate(batch):
            keep[i, len(example["texts"]) :] = False  # the collator's empty passages: no states at inference
        for example, states, kept in zip(batch, hidden, keep.flatten(1), strict=True):
            out.append({"states": states[kept].to(torch.float16).clone(), "answer": example["answer"]})
    model.train(was_training)
    return out


@dataclass
class PassageStatesCollator:
    """
    Pads a batch of ``passage_states``: ``encoder_hidden_states`` ``(B, n, d)`` float32, ``attention_mask``
    ``(B, n)``, ``labels`` ``(B, T)`` (``answer_labels``).
    """

    tokenizer: PreTrainedTokenizerBase
    max_answer_length: int = 24

    def __call__(self, batch: list[dict[str, Any]]) -> dict[str, Tensor]:
        length = max(e["states"].shape[0] for e in batch)
        hidden = torch.zeros(len(batch), length, batch[0]["states"].shape[1])
        mask = torch.zeros(len(batch), length, dtype=torch.long)
        for i, example in enumerate(batch):
            hidden[i, : example["states"].shape[0]] = example["states"].float()
            mask[i, : example["states"].shape[0]] = 1
        labels = answer_labels(self.tokenizer, [e["answer"] for e in batch], self.max_answer_length)
        return {"encoder_hidden_states": hidden, "attention_mask": mask, "labels": labels}


class FusionInDecoderTrainer(Trainer):
    """
    ``Trainer`` whose loss encodes the ``k`` passages of each question separately and fuses them (or reads fused
    states computed once, ``encoder_hidden_states``, when the encoder is frozen).

    :param fresh_learning_rate: The peak learning rate of ``fresh_parameter_names`` (the layers bert2bert adds);
        ``None``: ``args.learning_rate`` for all. The Trainer's own optimizer, weight-decay rule and schedule apply
        to both groups.
    """

    def __init__(self, *args: Any, fresh_learning_rate: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fresh_learning_rate = fresh_learning_rate

    def create_optimizer(self, model=None):
        if self.optimizer is None and self.fresh_learning_rate is not None:
            opt_model = self.model if model is None else model
            decay = set(self.get_decay_parameter_names(opt_model))
            fresh = fresh_parameter_names(opt_model)
            groups: dict[tuple[bool, bool], list[torch.nn.Parameter]] = {}
            for name, parameter in opt_model.named_parameters():
                if parameter.requires_grad:
                    groups.setdefault((name in fresh, name in decay), []).append(parameter)
            optimizer_cls, optimizer_kwargs = self.get_optimizer_cls_and_kwargs(self.args, opt_model)
            self.optimizer = optimizer_cls(
                [
                    {
                        "params": params,
                        "lr": self.fresh_learning_rate if is_fresh else self.args.learning_rate,
                        "weight_decay": self.args.weight_decay if decays else 0.0,
                    }
                    for (is_fresh, decays), params in sorted(groups.items())
                ],
                **optimizer_kwargs,
            )
        return super().create_optimizer(model)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if "encoder_hidden_states" in inputs:
            hidden, mask = inputs["encoder_hidden_states"], inputs["attention_mask"]
        else:
            hidden, mask = fused_encoder_outputs(model, inputs["input_ids"], inputs["attention_mask"])
        outputs = model(
            encoder_outputs=BaseModelOutput(last_hidden_state=hidden), attention_mask=mask, labels=inputs["labels"]
        )
        return (outputs.loss, outputs) if return_outputs else outputs.loss


def bert2bert(
    backbone: str,
    tokenizer: PreTrainedTokenizerBase,
    cross_attention_init: str = "random",
    *,
    encoder: str | None = None,
    decoder_layers: int | None = None,
) -> EncoderDecoderModel:
    """
    An ``EncoderDecoderModel`` warm-started from ``backbone`` on both sides, its special tokens set for generation.

    ``[CLS]`` starts the decoder, ``[SEP]`` ends the answer, ``[PAD]`` pads (the BERT recipe of Rothe et al. 2020).
    The decoder's cross-attention layers are new: random (``cross_attention_init="random"``, the recipe) or copies of
    the same layer's pretrained self-attention (``"self_attention"``: queries and keys start in the backbone's space).

    :param encoder: The encoder's own warm start (e.g. a trained extractive reader's folder: its backbone, without
        the span head), with the same vocabulary and width as ``backbone``; default ``backbone``.
    :param decoder_layers: Keep the backbone's first this many layers in the decoder; default all.
    """
    if cross_attention_init not in CROSS_ATTENTION_INITS:
        msg = f"cross_attention_init must be one of {list(CROSS_ATTENTION_INITS)}, got {cross_attention_init!r}."
        raise ValueError(msg)
    decoder_options = {} if decoder_layers is None else {"decoder_num_hidden_layers": decoder_layers}
    model = EncoderDecoderModel.from_encoder_decoder_pretrained(encoder or backbone, backbone, **decoder_options)
    if cross_attention_init == "self_attention":
        for layer in _decoder_layers(model):
            layer.crossattention.load_state_dict(layer.attention.state_dict())
    start = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    eos = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    for config in (model.config, model.generation_config):
        config.decoder_start_token_id = start
        config.bos_token_id = start
        config.eos_token_id = eos
        config.pad_token_id = tokenizer.pad_token_id
    return model


def _is_encoder_decoder(model: str) -> bool:
    """Whether ``model`` is a folder holding a saved ``EncoderDecoderModel`` (e.g. an earlier FiD reader)."""
    config = Path(model) / "config.json"
    try:
        return json.loads(config.read_text(encoding="utf-8")).get("model_type") == "encoder-decoder"
    except (OSError, ValueError):
        return False


def _decoder_layers(model: EncoderDecoderModel) -> list[Any]:
    """The decoder's transformer layers that carry a ``crossattention`` (BERT-like decoders)."""
    return [m for m in model.decoder.modules() if hasattr(m, "crossattention") and hasattr(m, "attention")]


def fresh_parameter_names(model: EncoderDecoderModel) -> set[str]:
    """The parameters bert2bert adds to the backbone: the decoder's cross-attention and its LM-head transform."""
    return {
        name
        for name, _ in model.named_parameters()
        if name.startswith("decoder.")
        and (
            ".crossattention." in name
            or name.startswith(("decoder.cls.predictions.transform.", "decoder.cls.predictions.bias"))
        )
    }


def train_fid_reader(args: ReaderTrainingArguments) -> dict[str, Any]:
    """
    Train a bert2bert Fusion-in-Decoder reader on the squad-mv training questions; save to ``args.output_dir``.

    :returns: A summary (steps, seconds, examples), also written to ``output_dir/reader_training.json``.
    """
    if args.threads:
        torch.set_num_threads(args.threads)
    set_seed(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    if _is_encoder_decoder(args.model):  # a saved FiD reader: train it further
        if args.encoder_model is not None or args.decoder_layers is not None:
            msg = "--encoder-model and --decoder-layers build a new reader; --model names a saved FiD reader."
            raise ValueError(msg)
        model = EncoderDecoderModel.from_pretrained(args.model)
    else:
        model = bert2bert(
            args.model,
            tokenizer,
            args.cross_attention_init,
            encoder=args.encoder_model,
            decoder_layers=args.decoder_layers,
        )

    questions, passages = training_questions(args.data_dir, args.limit)
    retrieved = read_retrieved(args.retrieved_file) if args.retrieved_file else None
    examples = fid_examples(questions, passages, retrieved, args.num_passages, args.answer_window)
    random.Random(args.seed).shuffle(examples)
    gold_added = sum(
        1 for q in questions if retrieved and q.positive_id not in retrieved.get(q.id, [])[: args.num_passages]
    )
    logger.info("FiD reader: %d questions, %d with the gold passage put in", len(examples), gold_added)

    collator: Any = FusionInDecoderCollator(
        tokenizer, args.num_passages, max_length=args.max_length, max_answer_length=args.max_answer_length
    )
    if args.freeze_encoder:  # the passages' states never change: compute them once, train the decoder on them
        model.get_encoder().requires_grad_(False)
        examples = passage_states(model, collator, examples, args.batch_size)
        collator = PassageStatesCollator(tokenizer, max_answer_length=args.max_answer_length)

    training_args, budget = trainer_settings(args)
    trainer = FusionInDecoderTrainer(
        model=model,
        args=training_args,
        train_dataset=examples,
        callbacks=budget,
        fresh_learning_rate=args.fresh_learning_rate,
        data_collator=collator,
    )
    details = {
        "kind": "fid",
        "backbone": args.model,
        "questions": len(examples),
        "gold_passage_added": gold_added,
        "num_passages": args.num_passages,
        "retrieved_file": str(args.retrieved_file) if args.retrieved_file else None,
        "answer_window": args.answer_window,
        "cross_attention_init": args.cross_attention_init,
        "fresh_learning_rate": args.fresh_learning_rate,
        "encoder_model": args.encoder_model,
        "decoder_layers": model.config.decoder.num_hidden_layers,
        "freeze_encoder": args.freeze_encoder,
    }
    return train_and_save(trainer, tokenizer, args, budget, details)
