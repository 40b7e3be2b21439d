"""``haystack-mvr``: train multi-view encoders and evaluate retrieval through Haystack pipelines."""

from __future__ import annotations

import argparse
import logging
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="haystack-mvr", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="Log at INFO level.")
    subparsers = parser.add_subparsers(dest="command", required=True)
    from haystack_mvr.cli.evaluate import add_eval_parser
    from haystack_mvr.cli.train import add_train_parser

    add_train_parser(subparsers)
    add_eval_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
