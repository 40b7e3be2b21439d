"""Training readers (extractive span heads, Fusion-in-Decoder) on squad-mv with transformers' Trainer."""

from haystack_mvr.training.readers.arguments import ReaderTrainingArguments
from haystack_mvr.training.readers.extractive import extractive_features, train_extractive_reader, training_questions
from haystack_mvr.training.readers.fusion_in_decoder import (
    FusionInDecoderCollator,
    FusionInDecoderTrainer,
    bert2bert,
    bm25_top_passages,
    fid_examples,
    read_retrieved,
    train_fid_reader,
)

__all__ = [
    "FusionInDecoderCollator",
    "FusionInDecoderTrainer",
    "ReaderTrainingArguments",
    "bert2bert",
    "bm25_top_passages",
    "extractive_features",
    "fid_examples",
    "read_retrieved",
    "train_extractive_reader",
    "train_fid_reader",
    "training_questions",
]
