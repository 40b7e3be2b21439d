"""Training readers (extractive span heads, Fusion-in-Decoder, LoRA generative) with transformers' Trainer.

The names below load on first use (PEP 562): ``haystack-mvr train-reader`` parses its arguments and checks
``--model`` from ``readers.arguments`` alone, before torch is imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from haystack_mvr._lazy import lazy_names

if TYPE_CHECKING:
    from haystack_mvr.modeling.generative_prompt import GENERATIVE_READER_TEMPLATE, reader_messages
    from haystack_mvr.training.readers.arguments import ReaderTrainingArguments
    from haystack_mvr.training.readers.extractive import (
        extractive_features,
        train_extractive_reader,
        training_questions,
    )
    from haystack_mvr.training.readers.fusion_in_decoder import (
        FusionInDecoderCollator,
        FusionInDecoderTrainer,
        bert2bert,
        fid_examples,
        train_fid_reader,
    )
    from haystack_mvr.training.readers.generative import (
        GenerativeCollator,
        generate_answers,
        generative_features,
        load_generative_reader,
        merge_generative_adapter,
        read_examples,
        save_merged,
        squad_mv_examples,
        train_from_examples,
        train_generative_reader,
    )
    from haystack_mvr.training.readers.retrieved_passages import (
        bm25_top_passages,
        passages_with_gold,
        read_retrieved,
        training_passages,
        write_retrieved,
    )
    from haystack_mvr.training.readers.shared_normalization import (
        SharedNormalizationCollator,
        SharedNormalizationTrainer,
        shared_normalization_examples,
    )

_MODULES = {
    "FusionInDecoderCollator": "fusion_in_decoder",
    "GENERATIVE_READER_TEMPLATE": "generative",
    "GenerativeCollator": "generative",
    "generate_answers": "generative",
    "generative_features": "generative",
    "load_generative_reader": "generative",
    "merge_generative_adapter": "generative",
    "read_examples": "generative",
    "reader_messages": "generative",
    "save_merged": "generative",
    "squad_mv_examples": "generative",
    "train_from_examples": "generative",
    "train_generative_reader": "generative",
    "FusionInDecoderTrainer": "fusion_in_decoder",
    "ReaderTrainingArguments": "arguments",
    "bert2bert": "fusion_in_decoder",
    "bm25_top_passages": "retrieved_passages",
    "extractive_features": "extractive",
    "fid_examples": "fusion_in_decoder",
    "read_retrieved": "retrieved_passages",
    "write_retrieved": "retrieved_passages",
    "passages_with_gold": "retrieved_passages",
    "shared_normalization_examples": "shared_normalization",
    "SharedNormalizationCollator": "shared_normalization",
    "SharedNormalizationTrainer": "shared_normalization",
    "training_passages": "retrieved_passages",
    "train_extractive_reader": "extractive",
    "train_fid_reader": "fusion_in_decoder",
    "training_questions": "extractive",
}

__all__ = [
    "GENERATIVE_READER_TEMPLATE",
    "FusionInDecoderCollator",
    "FusionInDecoderTrainer",
    "GenerativeCollator",
    "ReaderTrainingArguments",
    "SharedNormalizationCollator",
    "SharedNormalizationTrainer",
    "bert2bert",
    "bm25_top_passages",
    "extractive_features",
    "fid_examples",
    "generate_answers",
    "generative_features",
    "load_generative_reader",
    "merge_generative_adapter",
    "passages_with_gold",
    "read_examples",
    "read_retrieved",
    "reader_messages",
    "save_merged",
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
