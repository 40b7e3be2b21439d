"""Moved to :mod:`haystack_mvr.readers.training.fusion_in_decoder` and its data to
:mod:`haystack_mvr.readers.training.fusion_in_decoder_data` (the readers' wing); re-exported so that older imports
keep working."""

from haystack_mvr.readers.training.fusion_in_decoder import (
    FusionInDecoderTrainer,
    bert2bert,
    fresh_parameter_names,
    train_fid_reader,
)
from haystack_mvr.readers.training.fusion_in_decoder_data import (
    FusionInDecoderCollator,
    PassageStatesCollator,
    answer_labels,
    answer_window_text,
    fid_examples,
    passage_states,
)

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
