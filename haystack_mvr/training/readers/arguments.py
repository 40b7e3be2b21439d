"""Options of ``haystack-mvr train-reader``, as one dataclass (parsed from the command line)."""

from __future__ import annotations

import argparse
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, get_type_hints

__all__ = ["ReaderTrainingArguments"]

KINDS = ("extractive", "fid")
CROSS_ATTENTION_INITS = ("random", "self_attention")
_CONVERTERS: dict[Any, Any] = {
    Path: Path,
    Path | None: Path,
    int: int,
    int | None: int,
    float: float,
    float | None: float,
}


@dataclass
class ReaderTrainingArguments:
    """What ``train_extractive_reader`` and ``train_fid_reader`` need; every field is a ``--flag``."""

    kind: str = field(metadata={"help": "extractive: a span head (TransformersExtractiveReader); fid: bert2bert FiD."})
    model: str = field(
        metadata={
            "help": "Backbone folder or name (a BERT-like encoder, e.g. all-MiniLM-L6-v2); fid: or a saved FiD "
            "reader folder, trained further (--cross-attention-init is then ignored)."
        }
    )
    output_dir: Path = field(metadata={"help": "Where the checkpoint is written (keep it out of git)."})
    data_dir: Path = field(
        default=Path("../shared/data/squad-mv"), metadata={"help": "squad-mv folder: corpus.jsonl, train.jsonl."}
    )
    retrieved_file: Path | None = field(
        default=None,
        metadata={
            "help": "JSONL of {id, passages: [corpus ids, best first]} from a retriever; the gold passage is put in "
            "when missing. fid: the passages fused; extractive: the passages whose spans compete in one softmax "
            "(shared normalization; distractors that mention an answer are skipped). Without it each question reads "
            "its gold passage only."
        },
    )
    num_passages: int = field(default=3, metadata={"help": "Passages per question (k) with --retrieved-file."})
    max_length: int = field(default=256, metadata={"help": "Tokens per (question, passage) input."})
    stride: int = field(default=64, metadata={"help": "extractive: overlap of the windows of a long passage."})
    max_answer_length: int = field(default=24, metadata={"help": "fid: answer tokens kept as labels."})
    answer_window: int | None = field(
        default=None,
        metadata={
            "help": "fid: a gold paragraph longer than this many characters is cut to a window of them that starts "
            "at a sentence start before the answer (the paragraph start when the answer fits), so truncation to "
            "--max-length rarely drops the answer (about 450 characters for 128 tokens). Default: whole paragraphs."
        },
    )
    cross_attention_init: str = field(
        default="random",
        metadata={
            "help": "fid: random (the bert2bert recipe) or self_attention (each decoder layer's cross-attention "
            "starts as a copy of that layer's pretrained self-attention)."
        },
    )
    fresh_learning_rate: float | None = field(
        default=None,
        metadata={
            "help": "fid: peak learning rate of the layers bert2bert adds to the backbone (the decoder's "
            "cross-attention and LM-head transform); default: --learning-rate."
        },
    )
    encoder_model: str | None = field(
        default=None,
        metadata={
            "help": "fid: the encoder's own warm start, e.g. a train-reader --kind extractive folder (its backbone "
            "knows where answers are); same vocabulary and width as --model. Default: --model."
        },
    )
    decoder_layers: int | None = field(
        default=None, metadata={"help": "fid: keep the backbone's first N layers in the decoder (default: all)."}
    )
    freeze_encoder: bool = field(
        default=False,
        metadata={
            "help": "fid: train the decoder alone; each question's fused passage states are computed once, before "
            "training, so a step costs the decoder only."
        },
    )
    epochs: float = field(default=1.0, metadata={"help": "Training epochs (ignored when --max-steps is set)."})
    max_steps: int = field(default=-1, metadata={"help": "Stop after this many optimizer steps (-1: use epochs)."})
    max_minutes: float | None = field(
        default=None,
        metadata={
            "help": "Stop after this many minutes of training (a CPU budget; the LR schedule "
            "still follows max_steps / epochs)."
        },
    )
    batch_size: int = field(
        default=16,
        metadata={"help": "Questions (fid, extractive with --retrieved-file) or windows (extractive) per step."},
    )
    learning_rate: float = field(
        default=5e-5, metadata={"help": "Peak learning rate (linear decay after a warm-up of a tenth of the steps)."}
    )
    limit: int | None = field(default=None, metadata={"help": "Train on the first N training questions only."})
    seed: int = field(default=42, metadata={"help": "Random seed."})
    threads: int | None = field(default=None, metadata={"help": "torch.set_num_threads (CPU)."})
    logging_steps: int = field(default=20, metadata={"help": "Log the loss every N steps."})

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            msg = f"kind must be one of {list(KINDS)}, got {self.kind!r}."
            raise ValueError(msg)
        for name in (
            "num_passages",
            "max_length",
            "batch_size",
            "max_answer_length",
            "answer_window",
            "decoder_layers",
        ):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                msg = f"{name} must be a positive integer, got {getattr(self, name)!r}."
                raise ValueError(msg)
        if self.cross_attention_init not in CROSS_ATTENTION_INITS:
            msg = (
                f"cross_attention_init must be one of {list(CROSS_ATTENTION_INITS)}, got {self.cross_attention_init!r}."
            )
            raise ValueError(msg)
        fid_only = [name for name in ("encoder_model", "decoder_layers") if getattr(self, name) is not None]
        fid_only += ["freeze_encoder"] if self.freeze_encoder else []
        if self.kind == "extractive" and fid_only:
            msg = f"{', '.join('--' + n.replace('_', '-') for n in fid_only)} only apply to --kind fid."
            raise ValueError(msg)
        if self.kind == "extractive" and not 0 <= self.stride < self.max_length // 2:
            msg = f"stride must be in [0, max_length / 2), got {self.stride} for max_length {self.max_length}."
            raise ValueError(msg)
        self.output_dir = Path(self.output_dir)
        self.data_dir = Path(self.data_dir)
        if self.retrieved_file is not None:
            self.retrieved_file = Path(self.retrieved_file)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """One ``--flag`` per field (``kind`` as ``--kind``, required fields required)."""
        hints = get_type_hints(cls)
        for f in fields(cls):
            kind: Any = hints[f.name]
            flag = "--" + f.name.replace("_", "-")
            convert = _CONVERTERS.get(kind, str)
            required = f.default is MISSING
            options: dict[str, Any] = {"type": convert, "help": f.metadata.get("help")}
            if f.name == "kind":
                options["choices"] = KINDS
            if f.name == "cross_attention_init":
                options["choices"] = CROSS_ATTENTION_INITS
            if kind is bool:
                parser.add_argument(flag, dest=f.name, action="store_true", help=options["help"])
                continue
            if required:
                options["required"] = True
            else:
                options["default"] = f.default
            parser.add_argument(flag, dest=f.name, **options)

    @classmethod
    def from_namespace(cls, namespace: argparse.Namespace) -> ReaderTrainingArguments:
        return cls(**{f.name: getattr(namespace, f.name) for f in fields(cls)})
