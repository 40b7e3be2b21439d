"""
Train a Fusion-in-Decoder reader (Izacard & Grave, 2021) with transformers' ``Trainer``.

A BERT-like backbone is warm-started on both sides of an ``EncoderDecoderModel`` (bert2bert: the decoder is the
backbone with causal self-attention and fresh cross-attention layers). Each training question reads ``k``
passages, the retriever's own top-k (``retrieved_file``) with the gold paragraph put in place of the last one when
the retriever missed it; every passage is encoded on its own as ``question: ... title: ... context: ...``
(``format_fid_input``), the encoder states of the ``k`` passages are concatenated (``fused_encoder_outputs``) and
the decoder is trained to generate the first answer (teacher forcing, cross-entropy). The Trainer's own loop runs
it; only ``compute_loss`` is ours. The saved folder loads in ``FusionInDecoderReader(model=folder)``. The examples
and collators are in ``fusion_in_decoder_data``.
"""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoTokenizer,
    EncoderDecoderModel,
    PreTrainedTokenizerBase,
    Trainer,
    set_seed,
)
from transformers.modeling_outputs import BaseModelOutput

from haystack_mvr.readers.fusion_in_decoder_model import fused_encoder_outputs
from haystack_mvr.readers.training.arguments import CROSS_ATTENTION_INITS, ReaderTrainingArguments
from haystack_mvr.readers.training.extractive import training_questions
from haystack_mvr.readers.training.fusion_in_decoder_data import (
    FusionInDecoderCollator,
    PassageStatesCollator,
    fid_examples,
    passage_states,
)
from haystack_mvr.readers.training.retrieved_passages import read_retrieved
from haystack_mvr.readers.training.trainer_setup import train_and_save, trainer_settings

__all__ = ["FusionInDecoderTrainer", "bert2bert", "fresh_parameter_names", "train_fid_reader"]

logger = logging.getLogger(__name__)


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
