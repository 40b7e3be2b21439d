"""Training readers (extractive span heads, Fusion-in-Decoder, LoRA generative) with transformers' Trainer.

One module per job: ``arguments`` (the ``train-reader`` options), ``trainer_setup`` and ``budget_callback`` (what
the trainings share), ``retrieved_passages`` (the passages each question reads), ``extractive`` and
``shared_normalization`` (span readers), ``fusion_in_decoder_data`` and ``fusion_in_decoder`` (FiD),
``generative_data``, ``generative`` and ``answer_token_loss`` (LoRA on a chat LM; its model and inference are
``haystack_mvr.readers.generative_model``). None imports haystack.

The names below load on first use (PEP 562): ``haystack-mvr train-reader`` parses its arguments and checks
``--model`` from ``readers.training.arguments`` alone, before torch is imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from haystack_mvr._lazy import lazy_names

if TYPE_CHECKING:
    from haystack_mvr.readers.training.arguments import ReaderTrainingArguments
    from haystack_mvr.readers.training.budget_callback import WallClockBudgetCallback
    from haystack_mvr.readers.training.extractive import (
        extractive_features,
        train_extractive_reader,
        training_questions,
    )
    from haystack_mvr.readers.training.fusion_in_decoder import (
        FusionInDecoderTrainer,
        bert2bert,
        train_fid_reader,
    )
    from haystack_mvr.readers.training.fusion_in_decoder_data import FusionInDecoderCollator, fid_examples
    from haystack_mvr.readers.training.generative import train_from_examples, train_generative_reader
    from haystack_mvr.readers.training.generative_data import (
        GenerativeCollator,
        generative_features,
        read_examples,
        squad_mv_examples,
    )
    from haystack_mvr.readers.training.retrieved_passages import (
        bm25_top_passages,
        passages_with_gold,
        read_retrieved,
        training_passages,
        write_retrieved,
    )
    from haystack_mvr.readers.training.shared_normalization import (
        SharedNormalizationCollator,
        SharedNormalizationTrainer,
        shared_normalization_examples,
    )

_MODULES = {
    "FusionInDecoderCollator": "fusion_in_decoder_data",
    "FusionInDecoderTrainer": "fusion_in_decoder",
    "GenerativeCollator": "generative_data",
    "ReaderTrainingArguments": "arguments",
    "SharedNormalizationCollator": "shared_normalization",
    "SharedNormalizationTrainer": "shared_normalization",
    "WallClockBudgetCallback": "budget_callback",
    "bert2bert": "fusion_in_decoder",
    "bm25_top_passages": "retrieved_passages",
    "extractive_features": "extractive",
    "fid_examples": "fusion_in_decoder_data",
    "generative_features": "generative_data",
    "passages_with_gold": "retrieved_passages",
    "read_examples": "generative_data",
    "read_retrieved": "retrieved_passages",
    "shared_normalization_examples": "shared_normalization",
    "squad_mv_examples": "generative_data",
    "train_extractive_reader": "extractive",
    "train_fid_reader": "fusion_in_decoder",
    "train_from_examples": "generative",
    "train_generative_reader": "generative",
    "training_passages": "retrieved_passages",
    "training_questions": "extractive",
    "write_retrieved": "retrieved_passages",
}

__all__ = [
    "FusionInDecoderCollator",
    "FusionInDecoderTrainer",
    "GenerativeCollator",
    "ReaderTrainingArguments",
    "SharedNormalizationCollator",
    "SharedNormalizationTrainer",
    "WallClockBudgetCallback",
    "bert2bert",
    "bm25_top_passages",
    "extractive_features",
    "fid_examples",
    "generative_features",
    "passages_with_gold",
    "read_examples",
    "read_retrieved",
    "shared_normalization_examples",
    "squad_mv_examples",
    "train_extractive_reader",
    "train_fid_reader",
    "train_from_examples",
    "train_generative_reader",
    "training_passages",
    "training_questions",
    "write_retrieved",
]


__getattr__, __dir__ = lazy_names(__name__, _MODULES, globals(), __all__)
