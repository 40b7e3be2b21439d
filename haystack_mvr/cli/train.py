"""``haystack-mvr train`` and ``haystack-mvr mine-negatives``."""

from __future__ import annotations

import argparse
from pathlib import Path

from haystack_mvr.cli.errors import CommandError

EPILOG = """\
examples:
  haystack-mvr train --data-format squad-mv --data-dir ../shared/data/squad-mv --model bert-base-uncased \\
      --mode camvr --num-views 8 --output-dir runs/camvr --epochs 40
  haystack-mvr train --config args.json --output-dir runs/other     # flags override the JSON file
  # snippet mode trains through sentence-transformers' MultiVectorEncoderTrainer (a MultiVectorEncoder folder)
  haystack-mvr train --mode snippet --model sentence-transformers/all-MiniLM-L6-v2 --num-views 8 \\
      --data-dir ../shared/data/squad-mv --output-dir runs/snippet --precision bf16 --gradient-checkpointing
  torchrun --nproc-per-node 2 -m haystack_mvr.cli.main train --config args.json
  # coCondenser / CAMVR round two: mine with round one's model, retrain from the backbone
  haystack-mvr mine-negatives --model runs/camvr --data-dir ../shared/data/squad-mv --output runs/negatives.jsonl
  haystack-mvr train --config args.json --negatives-file runs/negatives.jsonl --output-dir runs/camvr-hn
"""


def add_train_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``train`` on the top-level subparsers."""
    from haystack_mvr.training.arguments import TrainingArguments

    parser = subparsers.add_parser(
        "train",
        help="Train an MVR / CAMVR / DPR (num_views=1) / snippet-mode encoder.",
        description="Train a multi-view dense retriever; the result loads with model=<output_dir>.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    TrainingArguments.add_arguments(parser)
    parser.set_defaults(handler=run_train)
    return parser


def add_mine_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``mine-negatives``, the second-round companion of ``train``."""
    from haystack_mvr.training.arguments import MiningArguments

    parser = subparsers.add_parser(
        "mine-negatives",
        help="Mine hard negatives with a trained checkpoint (for --negatives-file).",
        description="Encode the corpus with a checkpoint and keep each query's best-ranked passages that are "
        "neither its positive nor contain an answer.",
    )
    MiningArguments.add_arguments(parser)
    parser.set_defaults(handler=run_mine)
    return parser


def check_paths(arguments, names: tuple[str, ...]) -> None:
    """One clear line for a path option that points nowhere, before any model is loaded."""
    for name in names:
        value = getattr(arguments, name, None)
        if value and not Path(value).exists():
            flag = "--" + name.replace("_", "-")
            msg = f"{flag} {value}: no such file or directory."
            if name == "data_dir":
                msg += " Point it at a squad-mv folder (e.g. ../shared/data/squad-mv), a DPR file or a BEIR folder."
            raise CommandError(msg)


def check_model(model: str) -> None:
    """A missing model folder, or a hub id that cannot load offline, fails here: before torch is even imported."""
    from haystack_mvr.modeling.loading import resolve_model

    resolve_model(model)  # raises ModelNotFoundError naming the model and the packaged weights


def run_train(namespace: argparse.Namespace) -> int:
    from haystack_mvr.training.arguments import TrainingArguments

    arguments = TrainingArguments.from_namespace(namespace)
    check_paths(arguments, ("data_dir", "negatives_file"))
    check_model(arguments.model)
    from haystack_mvr.training.st_training import train

    output = train(arguments)
    print(f"Saved the trained encoder to {output}")
    return 0


def run_mine(namespace: argparse.Namespace) -> int:
    from haystack_mvr.training.arguments import MiningArguments

    arguments = MiningArguments.from_namespace(namespace)
    check_paths(arguments, ("data_dir",))
    check_model(arguments.model)
    from haystack_mvr.training.api import mine

    output = mine(arguments)
    print(f"Wrote mined negatives to {output}")
    return 0
