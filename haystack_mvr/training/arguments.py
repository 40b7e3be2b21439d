"""Training configuration: one dataclass, read from the command line or a JSON file (every field has ``help``)."""

from __future__ import annotations

import argparse
import json
import types
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from haystack_mvr.modeling.config import MODES

DATA_FORMATS: tuple[str, ...] = ("squad-mv", "dpr", "beir")
LOSSES: tuple[str, ...] = ("auto", "global-local", "answer-view")
PRECISIONS: tuple[str, ...] = ("auto", "fp32", "bf16", "fp16")


def _arg(default: Any, help: str, group: str, **extra: Any) -> Any:
    return field(default=default, metadata={"help": help, "group": group, **extra})


@dataclass
class TrainingArguments:
    """
    Everything a training run needs; saved as ``training_args.json`` in the output directory.

    ```python
    args = TrainingArguments(model="bert-base-uncased", mode="camvr", num_views=8,
                             data_dir="../shared/data/squad-mv", output_dir="runs/camvr")
    args = TrainingArguments.from_json("args.json")          # the same fields as a JSON object
    ```

    Every field maps onto sentence-transformers' ``MultiVectorEncoderTrainingArguments`` or onto the model
    (:mod:`haystack_mvr.training.st_training`). Model options left at ``None`` take
    :class:`~haystack_mvr.modeling.MultiViewConfig`'s defaults for a new encoder, or the saved values when ``model``
    is a saved folder (a different mode or number of views is an error there). Batch sizes are per process and
    micro-batch: the contrastive negatives of a query are the documents of its own micro-batch, gathered over all
    processes; gradient accumulation adds micro-batch losses, it does not enlarge the set of negatives.
    """

    # ---------------------------------------------------------------------------------------------- model
    model: str = _arg("", "Backbone name or path (BERT-like), or a multi-view checkpoint directory.", "model")
    mode: Literal["mvr", "camvr", "snippet"] | None = _arg(
        None,
        "Multi-view mode: mvr (k viewers before the text), camvr (a viewer per snippet) or snippet "
        "(default for a new encoder: mvr).",
        "model",
        choices=MODES,
    )
    num_views: int | None = _arg(
        None,
        "Views per document (k viewers / n snippets; default 8). "
        "num_views=1 with mode mvr is the single-vector DPR baseline.",
        "model",
    )
    query_max_length: int | None = _arg(None, "Query length in tokens (default 64).", "model")
    doc_max_length: int | None = _arg(None, "Document length in tokens, viewers included (default 256).", "model")
    normalize: bool | None = _arg(None, "L2-normalise vectors (default off: inner products, as DPR/MVR).", "model")
    tied: bool | None = _arg(None, "Share one backbone between queries and documents (default on).", "model")
    viewer_init: Literal["random", "cls"] | None = _arg(
        None,
        "Initialise viewer token embeddings randomly (paper) or from [CLS] (default random). cls is refused for "
        "several MVR viewers: copies of one token at one position stay identical views.",
        "model",
        choices=("random", "cls"),
    )
    viewer_position: int | None = _arg(
        None,
        "mvr: the position id shared by all viewers (paper: 0, the default). Use 1 on a backbone whose "
        "position 0 is an attention sink, such as all-MiniLM-L6-v2, where the views otherwise collapse.",
        "model",
    )
    gradient_checkpointing: bool = _arg(False, "Recompute activations in the backward pass to save memory.", "model")

    # ----------------------------------------------------------------------------------------------- data
    data_format: Literal["squad-mv", "dpr", "beir"] = _arg(
        "squad-mv",
        "Training data format: squad-mv (train.jsonl + corpus.jsonl), dpr (DPR biencoder "
        ".json/.jsonl), beir (corpus.jsonl, queries.jsonl, qrels/<split>.tsv).",
        "data",
        choices=DATA_FORMATS,
    )
    data_dir: str = _arg("", "The data: a directory (squad-mv, beir) or a file (dpr).", "data")
    beir_split: str = _arg("train", "BEIR qrels split to train on (qrels/<split>.tsv).", "data")
    include_dev_articles: bool = _arg(
        False, "squad-mv: also train on the DEV_ARTICLES questions (then report no dev numbers).", "data"
    )
    embed_title: bool = _arg(
        False,
        "Encode documents as title + title_separator + text (embed them the same way: "
        "meta_fields_to_embed=['title'] with the same separator).",
        "data",
    )
    title_separator: str = _arg("\n", "Separator between title and text when embed_title is on.", "data")
    max_examples: int | None = _arg(None, "Train on the first N examples only (smoke tests).", "data")

    # ------------------------------------------------------------------------------------------ negatives
    num_hard_negatives: int = _arg(
        1, "Hard negatives per query, drawn once from its pool when the dataset is built (DPR: 1).", "negatives"
    )
    num_bm25_negatives: int = _arg(
        30,
        "BM25 negatives mined per query into its pool (title + text, English stopwords; never the positive, "
        "never a passage containing an answer); 0 for none.",
        "negatives",
    )
    bm25_depth: int = _arg(100, "How deep to look in the BM25 ranking for negatives.", "negatives")
    negatives_file: str | None = _arg(
        None,
        "JSONL of mined hard negatives (from `haystack-mvr mine-negatives`), added to each query's pool.",
        "negatives",
    )
    use_file_negatives: bool = _arg(True, "dpr: put hard_negative_ctxs (or negative_ctxs) into the pool.", "negatives")

    # -------------------------------------------------------------------------------------------- loss
    loss: Literal["auto", "global-local", "answer-view"] = _arg(
        "auto",
        "auto: answer-view (CAMVR Eq. 13) for camvr, global-local (MVR Eq. 5-7) otherwise.",
        "loss",
        choices=LOSSES,
    )
    lambda_local: float | None = _arg(
        None,
        "Weight of the local uniformity loss (MVR Eq. 5; default 0.01 for global-local, 0 for answer-view).",
        "loss",
    )
    temperature_alpha: float = _arg(0.1, "alpha of the annealed temperature, MVR Eq. 8.", "loss")
    temperature_min: float = _arg(0.3, "Floor of the annealed temperature, MVR Eq. 8.", "loss")
    temperature_per_epoch: bool = _arg(
        True, "Step the temperature once per epoch as the paper does (off: anneal with the fractional epoch).", "loss"
    )
    temperature: float | None = _arg(None, "A fixed temperature instead of the annealed schedule.", "loss")

    # ------------------------------------------------------------------------------------ optimisation
    output_dir: str = _arg("", "Where checkpoints, logs, the plot and the final model go.", "training")
    epochs: int = _arg(1, "Training epochs (MVR: 40 on the full data).", "training")
    max_steps: int | None = _arg(None, "Stop after this many optimiser steps (overrides epochs).", "training")
    batch_size: int = _arg(32, "Queries per micro-batch and process.", "training")
    grad_accumulation: int = _arg(1, "Micro-batches per optimiser step (negatives stay per micro-batch).", "training")
    lr: float = _arg(2e-5, "Peak learning rate of AdamW (DPR: 2e-5; CAMVR: 1e-5).", "training")
    weight_decay: float = _arg(0.0, "AdamW weight decay (not applied to biases and LayerNorm).", "training")
    warmup_ratio: float = _arg(0.1, "Linear warm-up as a fraction of all optimiser steps.", "training")
    warmup_steps: int | None = _arg(None, "Linear warm-up steps (overrides warmup_ratio).", "training")
    max_grad_norm: float = _arg(2.0, "Gradient clipping norm (DPR: 2.0); 0 disables clipping.", "training")
    precision: Literal["auto", "fp32", "bf16", "fp16"] = _arg(
        "auto", "auto: bf16 autocast on a CUDA GPU that supports it, fp32 otherwise.", "training", choices=PRECISIONS
    )
    seed: int = _arg(42, "Random seed (model init, data order, negative sampling, dropout).", "training")
    device: str | None = _arg(
        None, "cpu or cuda (default: cuda if available; pick GPUs with CUDA_VISIBLE_DEVICES).", "training"
    )
    num_workers: int = _arg(0, "DataLoader worker processes.", "training")

    # ----------------------------------------------------------------------------------- checkpointing
    save_every: int | None = _arg(
        None, "Save a resumable checkpoint every N optimiser steps (default: each epoch end).", "checkpointing"
    )
    save_total_limit: int = _arg(2, "Keep only the newest N checkpoints (0 keeps all).", "checkpointing")
    resume_from: str | None = _arg(
        None, "Resume from a checkpoint directory, or 'latest' in output_dir.", "checkpointing"
    )
    log_every: int = _arg(10, "Log every N optimiser steps (train_log.jsonl, trainer_state.json).", "checkpointing")
    progress_bar: bool = _arg(True, "Show a tqdm progress bar (rank 0).", "checkpointing")

    def __post_init__(self) -> None:
        self.validate()

    # ---------------------------------------------------------------------------------------- checks
    def validate(self) -> None:
        """Reject missing paths, out-of-range values and option combinations that would be silently ignored."""
        problems = []
        if not self.model:
            problems.append("model is required (a backbone name/path or a multi-view checkpoint)")
        if not self.output_dir:
            problems.append("output_dir is required")
        if not self.data_dir:
            problems.append("data_dir is required")
        if self.mode is not None and self.mode not in MODES:
            problems.append(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.data_format not in DATA_FORMATS:
            problems.append(f"data_format must be one of {DATA_FORMATS}, got {self.data_format!r}")
        if self.loss not in LOSSES:
            problems.append(f"loss must be one of {LOSSES}, got {self.loss!r}")
        if self.precision not in PRECISIONS:
            problems.append(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        for name in ("epochs", "batch_size", "grad_accumulation", "log_every"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("num_hard_negatives", "num_bm25_negatives", "num_workers", "save_total_limit"):
            if getattr(self, name) < 0:
                problems.append(f"{name} must be non-negative, got {getattr(self, name)}")
        for name in ("max_steps", "save_every", "max_examples", "num_views"):
            value = getattr(self, name)
            if value is not None and value < 1:
                problems.append(f"{name} must be at least 1 when given, got {value}")
        if self.bm25_depth < self.num_bm25_negatives:
            problems.append(
                f"bm25_depth ({self.bm25_depth}) must be at least num_bm25_negatives ({self.num_bm25_negatives})"
            )
        if self.lr <= 0:
            problems.append(f"lr must be positive, got {self.lr}")
        if not 0 <= self.warmup_ratio < 1:
            problems.append(f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        if self.lambda_local is not None and self.lambda_local < 0:
            problems.append(f"lambda_local must be non-negative, got {self.lambda_local}")
        if self.temperature is not None:
            if self.temperature <= 0:
                problems.append(f"temperature must be positive, got {self.temperature}")
            if (self.temperature_alpha, self.temperature_min, self.temperature_per_epoch) != (0.1, 0.3, True):
                problems.append("a fixed temperature ignores temperature_alpha/min/per_epoch: set one or the other")
        elif self.temperature_min <= 0 or self.temperature_alpha < 0:
            problems.append("temperature_min must be positive and temperature_alpha non-negative")
        # Combinations whose effect would silently vanish.
        if self.num_hard_negatives == 0 and (self.negatives_file or self.num_bm25_negatives):
            problems.append(
                "num_hard_negatives is 0, so the mined/BM25 negatives would never be used: set "
                "--num-bm25-negatives 0 and no --negatives-file, or num_hard_negatives >= 1"
            )
        if self.include_dev_articles and self.data_format != "squad-mv":
            problems.append("include_dev_articles applies to the squad-mv format only")
        if self.data_format != "dpr" and not self.use_file_negatives:
            problems.append("use_file_negatives applies to the dpr format only")
        if self.beir_split != "train" and self.data_format != "beir":
            problems.append("beir_split applies to the beir format only")
        if self.loss == "answer-view" and self.mode is not None and self.mode not in ("camvr", "snippet"):
            problems.append("the answer-view loss needs snippet views: use it with mode camvr or snippet")
        if self.mode == "snippet":
            viewer_options = [n for n in ("tied", "viewer_init", "viewer_position") if getattr(self, n) is not None]
            if viewer_options:
                problems.append(f"mode snippet has no viewer tokens: {', '.join(viewer_options)} would be ignored")
        if problems:
            msg = "Invalid training arguments:\n  - " + "\n  - ".join(problems)
            raise ValueError(msg)

    # -------------------------------------------------------------------------------- (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        return path

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainingArguments:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            msg = f"Unknown training argument(s): {', '.join(unknown)}. Known: {', '.join(sorted(known))}."
            raise ValueError(msg)
        return cls(**data)

    @classmethod
    def from_json(cls, path: str | Path) -> TrainingArguments:
        """Read arguments from a JSON object whose keys are the field names (``"num_views": 8``)."""
        return cls.from_dict(read_json_object(path, "training arguments"))

    # ---------------------------------------------------------------------------------------- CLI
    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Add ``--config`` and one ``--flag-name`` per field (grouped, with help) to ``parser``."""
        parser.add_argument(
            "--config",
            default=argparse.SUPPRESS,
            help="A JSON file of training arguments; flags given on the command line override it.",
        )
        add_dataclass_arguments(parser, cls)

    @classmethod
    def from_namespace(cls, namespace: argparse.Namespace) -> TrainingArguments:
        """Build from parsed flags: the ``--config`` file (if any) first, then every flag given explicitly."""
        return dataclass_from_namespace(cls, namespace)

    @classmethod
    def parse_args(cls, argv: list[str] | None = None) -> TrainingArguments:
        parser = argparse.ArgumentParser(description=cls.__doc__.splitlines()[1] if cls.__doc__ else None)
        cls.add_arguments(parser)
        return cls.from_namespace(parser.parse_args(argv))


@dataclass
class MiningArguments:
    """Mine hard negatives with a trained checkpoint (coCondenser / CAMVR round two)."""

    model: str = _arg("", "The multi-view checkpoint of round one.", "mining")
    output: str = _arg("", "The JSONL file to write (read back with --negatives-file).", "mining")
    data_format: Literal["squad-mv", "dpr", "beir"] = _arg(
        "squad-mv", "As for training.", "mining", choices=DATA_FORMATS
    )
    data_dir: str = _arg("", "As for training.", "mining")
    beir_split: str = _arg("train", "As for training.", "mining")
    include_dev_articles: bool = _arg(False, "As for training (squad-mv).", "mining")
    embed_title: bool = _arg(False, "As for training: encode title + separator + text.", "mining")
    title_separator: str = _arg("\n", "As for training.", "mining")
    max_examples: int | None = _arg(None, "Mine for the first N examples only.", "mining")
    num_negatives: int = _arg(30, "Negatives kept per query.", "mining")
    depth: int = _arg(100, "How deep to look in the dense ranking.", "mining")
    batch_size: int = _arg(64, "Encoding batch size.", "mining")
    device: str | None = _arg(None, "Device (default: cuda if available, else cpu).", "mining")

    def __post_init__(self) -> None:
        problems = [f"{n} is required" for n in ("model", "output", "data_dir") if not getattr(self, n)]
        if self.depth < self.num_negatives or self.num_negatives < 1:
            problems.append("need 1 <= num_negatives <= depth")
        if problems:
            msg = "Invalid mining arguments:\n  - " + "\n  - ".join(problems)
            raise ValueError(msg)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--config", default=argparse.SUPPRESS, help="A JSON file of mining arguments.")
        add_dataclass_arguments(parser, cls)

    @classmethod
    def from_namespace(cls, namespace: argparse.Namespace) -> MiningArguments:
        return dataclass_from_namespace(cls, namespace)


# ------------------------------------------------------------------------------------------ dataclass <-> argparse
def _unwrap_optional(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def add_dataclass_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """One ``--flag`` per dataclass field; defaults are suppressed so that only flags actually given are set."""
    hints = typing.get_type_hints(cls)
    groups: dict[str, argparse._ArgumentGroup] = {}
    for f in fields(cls):
        meta = f.metadata
        group = groups.setdefault(meta.get("group", "options"), parser.add_argument_group(meta.get("group")))
        flag = "--" + f.name.replace("_", "-")
        tp = _unwrap_optional(hints[f.name])
        default = None if f.default is MISSING else f.default
        help_text = meta.get("help", "")
        if default not in (None, ""):
            help_text += f" (default: {default!r})"
        help_text = help_text.replace("%", "%%")
        kwargs: dict[str, Any] = {"dest": f.name, "default": argparse.SUPPRESS, "help": help_text}
        if tp is bool:
            group.add_argument(flag, action=argparse.BooleanOptionalAction, **kwargs)
            continue
        if typing.get_origin(tp) is Literal:
            kwargs["choices"] = list(typing.get_args(tp))
            tp = type(typing.get_args(tp)[0])
        elif "choices" in meta:
            kwargs["choices"] = list(meta["choices"])
        if "choices" not in kwargs:
            kwargs["metavar"] = f.name.upper()
        group.add_argument(flag, type=tp, **kwargs)


def dataclass_from_namespace(cls: type, namespace: argparse.Namespace) -> Any:
    names = {f.name for f in fields(cls)}
    given = {k: v for k, v in vars(namespace).items() if k in names}
    config = getattr(namespace, "config", None)
    if config is None:
        return cls(**given)
    data = read_json_object(config, "arguments")
    unknown = sorted(set(data) - names)
    if unknown:
        msg = f"{config} must be a JSON object of known arguments; unknown: {unknown}."
        raise ValueError(msg)
    return cls(**{**data, **given})


def read_json_object(path: str | Path, what: str) -> dict[str, Any]:
    """The JSON object in ``path``; a ``ValueError`` naming ``what`` when it cannot be read or is not an object."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        msg = f"Cannot read {what} from {path}: {e}"
        raise ValueError(msg) from e
    if not isinstance(data, dict):
        msg = f"{path} must hold a JSON object of {what}."
        raise ValueError(msg)
    return data
