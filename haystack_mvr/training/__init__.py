"""Training multi-view encoders (imports modeling and sentence-transformers; never haystack)."""

from haystack_mvr.training.api import mine, train
from haystack_mvr.training.arguments import MiningArguments, TrainingArguments
from haystack_mvr.training.data import (
    TrainingData,
    TrainingExample,
    load_beir,
    load_dpr,
    load_squad_mv,
    load_training_data,
)
from haystack_mvr.training.data_collator import MultiViewDataCollator
from haystack_mvr.training.losses import (
    AnswerViewLoss,
    GlobalLocalLoss,
    MultiViewAnswerViewLoss,
    MultiViewGlobalLocalLoss,
    annealed_temperature,
)
from haystack_mvr.training.negatives import bm25_negatives, mine_negatives, read_negatives, write_negatives
from haystack_mvr.training.st_dataset import build_st_dataset
from haystack_mvr.training.st_training import build_trainer, train_st
from haystack_mvr.training.temperature_callback import AnnealedTemperatureCallback, add_temperature_callback
from haystack_mvr.training.view_stats_callback import ViewStatsCallback

__all__ = [
    "AnnealedTemperatureCallback",
    "AnswerViewLoss",
    "GlobalLocalLoss",
    "MiningArguments",
    "MultiViewAnswerViewLoss",
    "MultiViewDataCollator",
    "MultiViewGlobalLocalLoss",
    "TrainingArguments",
    "TrainingData",
    "TrainingExample",
    "ViewStatsCallback",
    "add_temperature_callback",
    "annealed_temperature",
    "bm25_negatives",
    "build_st_dataset",
    "build_trainer",
    "load_beir",
    "load_dpr",
    "load_squad_mv",
    "load_training_data",
    "mine",
    "mine_negatives",
    "read_negatives",
    "train",
    "train_st",
    "write_negatives",
]
