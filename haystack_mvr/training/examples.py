"""The training examples with their hard-negative pools (file, mined and BM25 negatives)."""

from __future__ import annotations

from collections.abc import Callable

from haystack_mvr.datasets.squad_mv import Passage
from haystack_mvr.training.arguments import TrainingArguments
from haystack_mvr.training.data import TrainingData, attach_negatives, load_training_data
from haystack_mvr.training.negatives import bm25_negatives, read_negatives


def text_of_passage(embed_title: bool, separator: str) -> Callable[[Passage], str]:
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
            text_of=text_of_passage(args.embed_title, args.title_separator),
        )
        data.examples = attach_negatives(data.examples, negatives)
    return data
