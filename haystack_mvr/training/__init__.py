"""Training multi-view encoders (imports modeling and sentence-transformers; never haystack). The losses are
``haystack_mvr.training.losses``.

The names below load on first use (PEP 562): ``haystack-mvr train --help`` and the check that ``--model`` exists
read ``training.arguments`` alone, without importing torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from haystack_mvr._lazy import lazy_names

if TYPE_CHECKING:
    from haystack_mvr.training.api import mine
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
    from haystack_mvr.training.negatives import bm25_negatives, mine_negatives, read_negatives, write_negatives
    from haystack_mvr.training.st_dataset import build_st_dataset
    from haystack_mvr.training.st_training import build_trainer, train
    from haystack_mvr.training.temperature_callback import AnnealedTemperatureCallback, add_temperature_callback
    from haystack_mvr.training.view_stats_callback import ViewStatsCallback

_MODULES = {
    "AnnealedTemperatureCallback": "temperature_callback",
    "MiningArguments": "arguments",
    "MultiViewDataCollator": "data_collator",
    "TrainingArguments": "arguments",
    "TrainingData": "data",
    "TrainingExample": "data",
    "ViewStatsCallback": "view_stats_callback",
    "add_temperature_callback": "temperature_callback",
    "bm25_negatives": "negatives",
    "build_st_dataset": "st_dataset",
    "build_trainer": "st_training",
    "load_beir": "data",
    "load_dpr": "data",
    "load_squad_mv": "data",
    "load_training_data": "data",
    "mine": "api",
    "mine_negatives": "negatives",
    "read_negatives": "negatives",
    "train": "st_training",
    "write_negatives": "negatives",
}

__all__ = [
    "AnnealedTemperatureCallback",
    "MiningArguments",
    "MultiViewDataCollator",
    "TrainingArguments",
    "TrainingData",
    "TrainingExample",
    "ViewStatsCallback",
    "add_temperature_callback",
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
    "write_negatives",
]


__getattr__, __dir__ = lazy_names(__name__, _MODULES, globals(), __all__)
