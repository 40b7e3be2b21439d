"""``haystack-mvr mine-negatives``: mine hard negatives with a trained encoder (``haystack-mvr train`` is
:func:`haystack_mvr.training.st_training.train`)."""

from __future__ import annotations

from pathlib import Path

import torch

from haystack_mvr.modeling.loading import LoadOptions
from haystack_mvr.modeling.st_encoder import open_encoder
from haystack_mvr.training.arguments import MiningArguments
from haystack_mvr.training.data import load_training_data
from haystack_mvr.training.examples import text_of_passage
from haystack_mvr.training.negatives import mine_negatives, write_negatives

__all__ = ["mine"]


def mine(args: MiningArguments) -> Path:
    """Mine dense hard negatives with a round-one checkpoint and write them for ``--negatives-file``."""
    data = load_training_data(
        args.data_format,
        args.data_dir,
        include_dev_articles=args.include_dev_articles,
        beir_split=args.beir_split,
        max_examples=args.max_examples,
    )
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    encoder = open_encoder(args.model, device, LoadOptions())
    negatives = mine_negatives(
        encoder,
        data.examples,
        data.corpus,
        num_negatives=args.num_negatives,
        depth=args.depth,
        batch_size=args.batch_size,
        text_of=text_of_passage(args.embed_title, args.title_separator),
        progress_bar=True,
    )
    return write_negatives(args.output, negatives)
