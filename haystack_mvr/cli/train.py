"""``haystack-mvr train`` and ``haystack-mvr mine-negatives``."""

from __future__ import annotations

import argparse

EPILOG = """\
examples:
  haystack-mvr train --data-format squad-mv --data-dir ../shared/data/squad-mv --model bert-base-uncased \\
      --mode camvr --num-views 8 --output-dir runs/camvr --epochs 40
  haystack-mvr train --config args.json --output-dir runs/other     # flags override the JSON file
  torchrun --nproc-per-node 2 -m haystack_mvr.cli.main train --config args.json
  # coCondenser / CAMVR round two: mine with round one's model, retrain from the backbone
  haystack-mvr mine-negatives --model runs/camvr --data-dir ../shared/data/squad-mv --output runs/negatives.jsonl
  haystack-mvr train --config args.json --negatives-file runs/negatives.jsonl --output-dir runs/camvr-hn
"""


def add_train_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``train`` (and ``mine-negatives``, its second-round companion) on the top-level subparsers."""
    from haystack_mvr.training.arguments import MiningArguments, TrainingArguments

    parser = subparsers.add_parser(
        "train",
        help="Train an MVR / CAMVR / DPR (num_views=1) encoder.",
        description="Train a multi-view dense retriever; the result loads with model=<output_dir>.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    TrainingArguments.add_arguments(parser)
    parser.set_defaults(handler=run_train)

    mine_parser = subparsers.add_parser(
        "mine-negatives",
        help="Mine hard negatives with a trained checkpoint (for --negatives-file).",
        description="Encode the corpus with a checkpoint and keep each query's best-ranked passages that are "
        "neither its positive nor contain an answer.",
    )
    MiningArguments.add_arguments(mine_parser)
    mine_parser.set_defaults(handler=run_mine)
    return parser


def run_train(namespace: argparse.Namespace) -> int:
    from haystack_mvr.training import TrainingArguments, train

    output = train(TrainingArguments.from_namespace(namespace))
    print(f"Saved the trained encoder to {output}")
    return 0


def run_mine(namespace: argparse.Namespace) -> int:
    from haystack_mvr.training import MiningArguments, mine

    output = mine(MiningArguments.from_namespace(namespace))
    print(f"Wrote mined negatives to {output}")
    return 0
