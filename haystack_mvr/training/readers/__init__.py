"""
Moved to :mod:`haystack_mvr.readers.training` (the readers' wing); this package re-exports its names, and the
generative reader's model and prompt names it used to export, so that older imports keep working. The names load on
first use (PEP 562), as there.
"""

from __future__ import annotations

from haystack_mvr._lazy import lazy_names

_TRAINING = {
    "FusionInDecoderCollator": "training.fusion_in_decoder_data",
    "FusionInDecoderTrainer": "training.fusion_in_decoder",
    "GenerativeCollator": "training.generative_data",
    "ReaderTrainingArguments": "training.arguments",
    "SharedNormalizationCollator": "training.shared_normalization",
    "SharedNormalizationTrainer": "training.shared_normalization",
    "bert2bert": "training.fusion_in_decoder",
    "bm25_top_passages": "training.retrieved_passages",
    "extractive_features": "training.extractive",
    "fid_examples": "training.fusion_in_decoder_data",
    "generative_features": "training.generative_data",
    "passages_with_gold": "training.retrieved_passages",
    "read_examples": "training.generative_data",
    "read_retrieved": "training.retrieved_passages",
    "shared_normalization_examples": "training.shared_normalization",
    "squad_mv_examples": "training.generative_data",
    "train_extractive_reader": "training.extractive",
    "train_fid_reader": "training.fusion_in_decoder",
    "train_from_examples": "training.generative",
    "train_generative_reader": "training.generative",
    "training_passages": "training.retrieved_passages",
    "training_questions": "training.extractive",
    "write_retrieved": "training.retrieved_passages",
}
_MODULES = {
    **_TRAINING,
    "GENERATIVE_READER_TEMPLATE": "generative_prompt",
    "generate_answers": "generative_model",
    "load_generative_reader": "generative_model",
    "merge_generative_adapter": "generative_model",
    "reader_messages": "generative_prompt",
    "save_merged": "generative_model",
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

__getattr__, __dir__ = lazy_names("haystack_mvr.readers", _MODULES, globals(), __all__)
