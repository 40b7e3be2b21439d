"""``haystack-mvr train`` / ``mine-negatives``: the examples with their negative pools, then sentence-transformers."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import torch

from haystack_mvr.modeling import MultiViewEncoder
from haystack_mvr.training.arguments import MiningArguments, TrainingArguments
from haystack_mvr.training.data import Passage, TrainingData, attach_negatives, load_training_data
from haystack_mvr.training.negatives import bm25_negatives, mine_negatives, read_negatives, write_negatives

logger = logging.getLogger(__name__)


def _text_of(embed_title: bool, separator: str) -> Callable[[Passage], str]:
    def text_of(p: Passage) -> str:
        return p.title + separator + p.text if embed_title and p.title else p.text

    return text_of


def load_examples(args: TrainingArguments) -> TrainingData:
    """The training examples with their hard-negative pools: file negatives, mined negatives, BM25 negatives."""
    data = load_training_data(
        args.data_format,
        args.data_dir,
        include_dev_articles=args.include_dev_articles,
        beir_split=args.beir_split,
        use_file_negatives=args.use_file_negatives,
        max_examples=args.max_examples,
    )
    if args.negatives_file:
        data.examples = attach_negatives(data.examples, read_negatives(args.negatives_file))
    if args.num_bm25_negatives:
        negatives = bm25_negatives(
            data.examples,
            data.corpus,
            num_negatives=args.num_bm25_negatives,
            depth=args.bm25_depth,
            text_of=_text_of(args.embed_title, args.title_separator),
        )
        data.examples = attach_negatives(data.examples, negatives)
    return data


def train(args: TrainingArguments) -> Path:
    """
    Train a multi-view encoder (MVR, CAMVR or snippet mode) through sentence-transformers'
    ``MultiVectorEncoderTrainer`` and save it to ``args.output_dir``
    (:func:`~haystack_mvr.training.st_training.train_st`); the result is a ``MultiVectorEncoder`` folder that the
    Haystack embedders load with ``model=<output_dir>``.

    ```python
    from haystack_mvr.training import TrainingArguments, train

    train(TrainingArguments(model="bert-base-uncased", mode="camvr", num_views=8,
                            data_dir="../shared/data/squad-mv", output_dir="runs/camvr", epochs=40))
    ```

    Under ``torchrun`` every process calls this; transformers sets up and tears down the process group.
    """
    from haystack_mvr.training.st_training import train_st

    return train_st(args)


def mine(args: MiningArguments) -> Path:
    """Mine dense hard negatives with a round-one checkpoint and write them for ``--negatives-file``."""
    data = load_training_data(
        args.data_format,
        args.data_dir,
        include_dev_articles=args.include_dev_articles,
        beir_split=args.beir_split,
        max_examples=args.max_examples,
    )
    encoder = MultiViewEncoder.from_pretrained(args.model)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    encoder.to(device)
    negatives = mine_negatives(
        encoder,
        data.examples,
        data.corpus,
        num_negatives=args.num_negatives,
        depth=args.depth,
        batch_size=args.batch_size,
        text_of=_text_of(args.embed_title, args.title_separator),
        progress_bar=True,
    )
    return write_negatives(args.output, negatives)
