"""``haystack-mvr convert``: a ``multi_view_config.json`` checkpoint -> a sentence-transformers folder."""

from __future__ import annotations

import argparse
from pathlib import Path

EPILOG = """\
examples:
  haystack-mvr convert runs/camvr runs/camvr-st
  # then: MultiVectorEncoder("runs/camvr-st", trust_remote_code=True), or model="runs/camvr-st" in the embedders
"""
# Texts the converted folder is checked on: several sentences (snippets), one short text, one past most lengths.
CHECK_TEXTS = [
    "Warsaw is the capital of Poland. It lies on the Vistula. Its old town was rebuilt after the war.",
    "Short one.",
    " ".join(f"Sentence number {i} says something about topic {i % 3}." for i in range(60)),
]
CHECK_QUERIES = ["Which river flows through Warsaw?", "topic"]
TOLERANCE = 1e-5


def add_convert_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``convert`` on the top-level subparsers."""
    parser = subparsers.add_parser(
        "convert",
        help="Convert a multi_view_config.json checkpoint to a sentence-transformers folder.",
        description="Write a haystack-mvr checkpoint (any mode, tied or not) as a sentence-transformers "
        "MultiVectorEncoder folder of haystack-mvr's modules, then check that it gives the same views "
        "and query vectors.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("checkpoint", type=Path, help="The checkpoint folder (with multi_view_config.json).")
    parser.add_argument("output", type=Path, help="The new folder (must not exist, or be empty).")
    parser.add_argument("--no-check", action="store_true", help="Skip comparing views and queries after writing.")
    parser.set_defaults(handler=run_convert)
    return parser


def check_arguments(checkpoint: Path, output: Path) -> None:
    """One clear line for a bad path, before any model is loaded."""
    from haystack_mvr.cli.errors import CommandError
    from haystack_mvr.modeling.config import CONFIG_NAME

    if not checkpoint.exists():
        msg = f"{checkpoint}: no such checkpoint folder."
        raise CommandError(msg)
    if not checkpoint.is_dir():
        msg = f"{checkpoint} is a file; pass the checkpoint folder (the one holding {CONFIG_NAME})."
        raise CommandError(msg)
    if not (checkpoint / CONFIG_NAME).is_file():
        if (checkpoint / "modules.json").is_file():
            msg = f"{checkpoint} is already a sentence-transformers folder (it has modules.json); nothing to convert."
        else:
            msg = f"{checkpoint} is not a haystack-mvr checkpoint: it has no {CONFIG_NAME}."
        raise CommandError(msg)
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        msg = f"{output} already exists and is not an empty folder; choose a new output folder."
        raise CommandError(msg)
    if output.resolve() == checkpoint.resolve():
        msg = "The output folder must differ from the checkpoint folder."
        raise CommandError(msg)


def convert(checkpoint: Path, output: Path, *, check: bool = True) -> float | None:
    """
    Convert ``checkpoint`` into ``output`` (``checkpoint_encoder``, as the embedders convert it on load);
    with ``check``, the largest absolute difference between its document views and query vectors before writing and
    after loading the written folder, on a few texts.

    :raises ValueError: when the written folder's vectors differ (beyond float rounding) or its views' count.
    """
    import numpy as np

    from haystack_mvr.cli.errors import CommandError

    try:
        from haystack_mvr.modeling.encoder_builders import checkpoint_encoder
        from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter
    except ImportError as e:
        msg = f"convert needs sentence-transformers>=6: pip install 'sentence-transformers>=6' ({e})."
        raise CommandError(msg) from e

    encoder = MultiVectorEncoderAdapter(checkpoint_encoder(checkpoint, device="cpu")).eval()
    output.mkdir(parents=True, exist_ok=True)
    encoder.model.save(str(output))
    if not check:
        return None
    converted = MultiVectorEncoderAdapter.load(output, device="cpu")
    before, after = encoder.encode_documents(CHECK_TEXTS), converted.encode_documents(CHECK_TEXTS)
    if [b.views.shape for b in before] != [a.views.shape for a in after]:
        msg = f"The converted folder gives other view counts: {[a.views.shape for a in after]}."
        raise ValueError(msg)
    difference = max(float(np.abs(b.views - a.views).max()) for b, a in zip(before, after, strict=True))
    queries = encoder.encode_queries(CHECK_QUERIES), converted.encode_queries(CHECK_QUERIES)
    difference = max(difference, float(np.abs(queries[0] - queries[1]).max()))
    if difference > TOLERANCE:
        msg = f"The converted folder's vectors differ from the checkpoint's by up to {difference:.3g}."
        raise ValueError(msg)
    return difference


def run_convert(namespace: argparse.Namespace) -> int:
    check_arguments(namespace.checkpoint, namespace.output)
    difference = convert(namespace.checkpoint, namespace.output, check=not namespace.no_check)
    checked = "" if difference is None else f"; same views and queries (max abs difference {difference:.1g})"
    print(
        f"Wrote {namespace.output}{checked}. Load it with MultiVectorEncoder({str(namespace.output)!r}, "
        f"trust_remote_code=True) or model={str(namespace.output)!r} in the Haystack embedders."
    )
    return 0
