"""
Training through sentence-transformers 6's ``MultiVectorEncoderTrainer``: the thin layer under ``haystack-mvr train``.

The driver reads top to bottom: arguments -> model -> examples -> dataset -> loss -> trainer -> train -> save.
sentence-transformers and transformers do the loop: AdamW with linear warm-up/decay, bf16/fp16, gradient
accumulation and checkpointing, DDP under ``torchrun`` (one process per GPU, nothing to set), checkpoints every
``save_every`` steps with resume (``resume_from="latest"`` or a ``checkpoint-N`` folder), logging
(``trainer_state.json``) and de-duplicated in-batch negatives (``BatchSamplers.NO_DUPLICATES``).

**Every mode.** :func:`load_model` builds MVR / CAMVR (``encoder_builders.viewer_encoder``: viewer tokens, tied or a
``Router`` of two backbones) and snippet mode (``encoder_builders.snippet_encoder``), or loads a saved folder (either
format); :func:`build_trainer` takes any ``MultiVectorEncoder`` whose query task gives one vector and whose document
task gives the views. :func:`snippet_layout` is the one place that knows where a model's snippet views are (for the
``answer_view`` column: CAMVR's view i is snippet i, snippet mode's view i + 1).

**Large batches on small GPUs (GradCache).** sentence-transformers' ``CachedMultiVectorMultipleNegativesRankingLoss``
is GradCache for Eq. 6 (MVR's global loss; equal to ours at ``lambda_local=0``, tested) and the
:class:`AnnealedTemperatureCallback` anneals its ``scale``: pass ``loss=`` to :func:`build_trainer`. The local term
(Eq. 7) and CAMVR's Eq. 13 have no cached variant.

```python
from haystack_mvr.training import TrainingArguments
from haystack_mvr.training import train

train(TrainingArguments(model="sentence-transformers/all-MiniLM-L6-v2", mode="snippet", num_views=8,
                           data_dir="../shared/data/squad-mv", output_dir="runs/snippet", epochs=2))
# MultiVectorEncoder("runs/snippet", trust_remote_code=True), or model="runs/snippet" in the Haystack embedders
```
"""

from __future__ import annotations

import json
import logging
from dataclasses import fields
from pathlib import Path
from typing import Any

import torch
import transformers
from sentence_transformers import (
    MultiVectorEncoder,
    MultiVectorEncoderTrainer,
    MultiVectorEncoderTrainingArguments,
)
from sentence_transformers.base.sampler import BatchSamplers
from torch import nn
from transformers import TrainerCallback

from haystack_mvr.modeling.config import CONFIG_NAME, MultiViewConfig
from haystack_mvr.modeling.loading import local_model
from haystack_mvr.training.arguments import TrainingArguments
from haystack_mvr.training.data_collator import ANSWER_VIEW, MultiViewDataCollator
from haystack_mvr.training.examples import load_examples
from haystack_mvr.training.losses import MultiViewAnswerViewLoss, MultiViewGlobalLocalLoss
from haystack_mvr.training.plotting import plot_training_log, write_log
from haystack_mvr.training.st_dataset import build_st_dataset
from haystack_mvr.training.temperature_callback import AnnealedTemperatureCallback, add_temperature_callback
from haystack_mvr.training.view_stats_callback import ViewStatsCallback

logger = logging.getLogger(__name__)

__all__ = [
    "ResumedLearningRateCallback",
    "build_loss",
    "build_trainer",
    "build_training_arguments",
    "is_multi_vector_folder",
    "load_model",
    "model_mode",
    "snippet_layout",
    "train",
]

ARGS_FILE = "training_args.json"
LOG_FILE = "train_log.jsonl"
PLOT_FILE = "train_plot.png"
# transformers renamed gradient_checkpointing to activation_checkpointing (the old name warns, then goes in v6)
_CHECKPOINTING = next(
    (f.name for f in fields(MultiVectorEncoderTrainingArguments) if f.name == "activation_checkpointing"),
    "gradient_checkpointing",
)

_TRANSFORMERS_MAJOR = int(transformers.__version__.split(".")[0])

#: the modes that train through sentence-transformers (all of them)
ST_MODES: tuple[str, ...] = ("mvr", "camvr", "snippet")


def is_multi_vector_folder(path: str | Path) -> bool:
    """Whether ``path`` is a saved ``MultiVectorEncoder`` (its ``config_sentence_transformers.json`` says so), not a
    ``SentenceTransformer`` backbone such as all-MiniLM-L6-v2 (which a new snippet encoder wraps)."""
    config = Path(path) / "config_sentence_transformers.json"
    try:
        return json.loads(config.read_text(encoding="utf-8")).get("model_type") == "MultiVectorEncoder"
    except (OSError, ValueError, AttributeError):
        return False


def snippet_layout(model: MultiVectorEncoder) -> tuple[int, int] | None:
    """
    ``(num_snippets, view of snippet 0)`` of a model with snippet views, ``None`` for one without.

    Snippet mode (``SnippetViews``): ``(n, 1)``, view 0 pools the whole text. CAMVR (``ViewerTransformer``, which
    declares ``num_snippets`` and ``first_snippet_view``): ``(n, 0)``, view i is the viewer of snippet i. MVR:
    ``None``. An untied model is read through its ``Router``'s document route.
    """
    from haystack_mvr.modeling.encoder_inspection import document_modules

    for module in reversed(document_modules(model)):
        num_snippets = getattr(module, "num_snippets", None)
        if num_snippets is not None:
            return int(num_snippets), int(getattr(module, "first_snippet_view", 1))
    return None


def answer_snippet_spans(model: MultiVectorEncoder):
    """
    Snippet mode: the text -> snippet spans reading of the model itself (a long document has more snippets than
    ``num_snippets``), so the answer-view label names the view the forward pass pools the answer into. ``None`` for
    CAMVR (Algorithm 1's fixed snippets) and MVR.
    """
    from haystack_mvr.modeling.encoder_inspection import document_modules, snippet_spans
    from haystack_mvr.modeling.snippet_views import SnippetViews

    if not any(isinstance(m, SnippetViews) for m in document_modules(model)):
        return None
    return lambda text: snippet_spans(model, [text])[0]


def model_mode(model: MultiVectorEncoder) -> tuple[str | None, int | None]:
    """``(mode, views)`` of a haystack-mvr ``MultiVectorEncoder`` (``(None, None)`` for any other)."""
    from haystack_mvr.modeling.encoder_inspection import document_modules
    from haystack_mvr.modeling.snippet_views import SnippetViews
    from haystack_mvr.modeling.viewer_transformer import ViewerTransformer

    for module in document_modules(model):
        if isinstance(module, ViewerTransformer):
            return module.mode, module.num_views
        if isinstance(module, SnippetViews):
            return "snippet", module.num_snippets
    return None, None


def load_model(args: TrainingArguments) -> MultiVectorEncoder:
    """
    The model to train: a saved folder (a ``MultiVectorEncoder`` or a ``multi_view_config.json`` checkpoint; a
    ``mode`` / ``num_views`` that differs from the saved one is refused), else a new encoder over the backbone:
    MVR / CAMVR (``mode``, default mvr) through ``encoder_builders.viewer_encoder`` with the viewer options,
    snippet mode through ``encoder_builders.snippet_encoder`` (the backbone's own pooling, normalisation and max
    length). A snippet model trains, and is saved with, late-chunking views (``snippet_encoding``).
    """
    from haystack_mvr.modeling.encoder_builders import checkpoint_encoder, snippet_encoder, viewer_encoder
    from haystack_mvr.modeling.encoder_inspection import view_modules

    # a missing folder, or a hub id offline and not cached, fails here at once (ModelNotFoundError), never after
    # transformers' download retries; a cached hub id loads from its snapshot folder
    path = local_model(args.model)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    saved = is_multi_vector_folder(path) or (Path(path) / CONFIG_NAME).is_file()
    if saved:
        if is_multi_vector_folder(path):
            model = MultiVectorEncoder(path, device=device, trust_remote_code=True)
        else:
            model = checkpoint_encoder(path, device=device)  # the older format, converted
        mode, views = model_mode(model)
        for name, given, has in (("mode", args.mode, mode), ("num_views", args.num_views, views)):
            if given is not None and has is not None and given != has:
                msg = f"{args.model} has {name} {has!r}, not {given!r}: leave {name} out."
                raise ValueError(msg)
    elif (args.mode or "mvr") == "snippet":
        model = snippet_encoder(path, num_snippets=args.num_views or 8, device=device)
    else:
        defaults = MultiViewConfig()
        model = viewer_encoder(
            path,
            mode=args.mode or "mvr",
            views=args.num_views or defaults.num_views,
            viewer_position=defaults.viewer_position if args.viewer_position is None else args.viewer_position,
            viewer_init=args.viewer_init or defaults.viewer_init,
            query_max_length=args.query_max_length or defaults.query_max_length,
            doc_max_length=args.doc_max_length or defaults.doc_max_length,
            normalize=bool(args.normalize),
            tied=args.tied is not False,
            device=device,
        )
    for module in view_modules(model):
        if args.normalize is not None:
            module.normalize = args.normalize
        if getattr(module, "snippet_encoding", None) == "own_text":
            module.snippet_encoding = "late_chunking"  # what the forward pass trains, so what the saved model gives
    return model


def build_loss(model: MultiVectorEncoder, args: TrainingArguments) -> nn.Module:
    """``auto``: CAMVR's answer-view loss (Eq. 13) for a camvr model, MVR's global-local loss (Eq. 5-7) otherwise;
    ``answer-view`` works on any model with snippet views (camvr and snippet mode)."""
    mode = args.mode or model_mode(model)[0]
    kind = args.loss if args.loss != "auto" else ("answer-view" if mode == "camvr" else "global-local")
    temperature = args.temperature or 1.0
    if kind == "answer-view":
        if snippet_layout(model) is None:
            msg = "The answer-view loss needs snippet views; this model has none."
            raise ValueError(msg)
        lambda_local = 0.0 if args.lambda_local is None else args.lambda_local
        return MultiViewAnswerViewLoss(model, lambda_local=lambda_local, temperature=temperature)
    lambda_local = 0.01 if args.lambda_local is None else args.lambda_local
    return MultiViewGlobalLocalLoss(model, lambda_local=lambda_local, temperature=temperature)


def _warmup(args: TrainingArguments) -> dict[str, float]:
    if _TRANSFORMERS_MAJOR >= 5:  # warmup_ratio is deprecated there: a float warmup_steps in [0, 1) is the ratio
        return {"warmup_steps": args.warmup_ratio if args.warmup_steps is None else args.warmup_steps}
    return {
        "warmup_ratio": args.warmup_ratio if args.warmup_steps is None else 0.0,
        "warmup_steps": args.warmup_steps or 0,
    }


def _precision(args: TrainingArguments) -> dict[str, bool]:
    if args.precision == "auto":
        return {"bf16": bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())}
    return {"bf16": args.precision == "bf16", "fp16": args.precision == "fp16"}


def build_training_arguments(args: TrainingArguments, **overrides: Any) -> MultiVectorEncoderTrainingArguments:
    """
    haystack-mvr's arguments as sentence-transformers' (``overrides`` win: any field of
    ``MultiVectorEncoderTrainingArguments``, e.g. ``ddp_find_unused_parameters`` or ``report_to``).
    """
    if args.device not in (None, "cpu", "cuda"):
        msg = (
            f"device {args.device!r}: sentence-transformers' trainer takes 'cpu' or 'cuda'; pick GPUs with "
            "CUDA_VISIBLE_DEVICES (one process per GPU under torchrun)."
        )
        raise ValueError(msg)
    max_length = {k: v for k, v in (("query", args.query_max_length), ("document", args.doc_max_length)) if v}
    saving: dict[str, Any] = {"save_strategy": "epoch"}
    if args.save_every:
        saving = {"save_strategy": "steps", "save_steps": args.save_every}
    settings: dict[str, Any] = {
        "output_dir": args.output_dir,
        "num_train_epochs": args.epochs,
        "max_steps": args.max_steps or -1,
        "per_device_train_batch_size": args.batch_size,
        "gradient_accumulation_steps": args.grad_accumulation,
        "learning_rate": args.lr,
        "weight_decay": args.weight_decay,
        **_warmup(args),
        "lr_scheduler_type": "linear",
        "max_grad_norm": args.max_grad_norm,
        "seed": args.seed,
        "data_seed": args.seed,
        _CHECKPOINTING: args.gradient_checkpointing,
        "dataloader_num_workers": args.num_workers,
        "save_total_limit": args.save_total_limit or None,
        "logging_steps": args.log_every,
        "disable_tqdm": not args.progress_bar,
        "report_to": "none",
        # squad-mv has several questions per paragraph: never let a query's positive be another's negative
        "batch_sampler": BatchSamplers.NO_DUPLICATES,
        "max_length": max_length or None,
        "use_cpu": args.device == "cpu",
        **_precision(args),
        **saving,
    }
    return MultiVectorEncoderTrainingArguments(**{**settings, **overrides})


def build_trainer(
    model: MultiVectorEncoder,
    args: TrainingArguments,
    train_dataset: Any,
    *,
    loss: nn.Module | None = None,
    **overrides: Any,
) -> MultiVectorEncoderTrainer:
    """
    A ``MultiVectorEncoderTrainer`` for any ``MultiVectorEncoder`` (the hook for MVR / CAMVR modules): our
    collator (it hands ``answer_view`` to the loss), the loss of :func:`build_loss` unless given, documents
    gathered across processes under DDP, and the annealed temperature unless ``args.temperature`` fixes it.
    """
    from sentence_transformers.base.modules import Router

    if any(isinstance(m, Router) for m in model.children()) and "router_mapping" not in overrides:
        # an untied model: the query column goes through the query backbone, every other column the document one
        columns = [c for c in getattr(train_dataset, "column_names", ()) if c != ANSWER_VIEW]
        overrides["router_mapping"] = {c: "query" if i == 0 else "document" for i, c in enumerate(columns)}
    st_args = build_training_arguments(args, **overrides)
    loss = build_loss(model, args) if loss is None else loss
    if st_args.world_size > 1 and hasattr(loss, "gather_across_devices"):
        loss.gather_across_devices = True  # every query sees the documents of all processes, as MVR/DPR train
    collator = MultiViewDataCollator(
        preprocess_fn=model.preprocess,
        router_mapping=st_args.router_mapping,
        prompts=st_args.prompts,
        max_length=st_args.max_length,
    )
    trainer = MultiVectorEncoderTrainer(
        model=model, args=st_args, train_dataset=train_dataset, loss=loss, data_collator=collator
    )
    if args.temperature is None:
        callback = AnnealedTemperatureCallback(
            loss, alpha=args.temperature_alpha, minimum=args.temperature_min, per_epoch=args.temperature_per_epoch
        )
        add_temperature_callback(trainer, callback)
    if hasattr(loss, "view_stats"):
        add_temperature_callback(trainer, ViewStatsCallback(loss))
    trainer.add_callback(ResumedLearningRateCallback())
    return trainer


class ResumedLearningRateCallback(TrainerCallback):
    """
    On resume, set the optimizer's learning rate to this run's schedule at the resumed step.

    transformers rebuilds the scheduler for this run's ``max_steps`` and restores its step from the checkpoint, but
    the optimizer's learning rate comes back as the checkpoint's, which the interrupted run's schedule set: resumed
    with a larger ``max_steps`` after a finished linear decay, the first resumed step trained at rate 0 (the
    scheduler's own rate takes over from the second). Resumed with the same arguments this changes nothing.
    """

    def on_train_begin(self, args, state, control, optimizer=None, lr_scheduler=None, **kwargs):
        scheduler = getattr(lr_scheduler, "scheduler", lr_scheduler)  # accelerate's wrapper, if any
        if not state.global_step or optimizer is None or not hasattr(scheduler, "lr_lambdas"):
            return
        rates = [
            base * f(scheduler.last_epoch) for base, f in zip(scheduler.base_lrs, scheduler.lr_lambdas, strict=True)
        ]
        for group, rate in zip(optimizer.param_groups, rates, strict=True):
            group["lr"] = rate
        scheduler._last_lr = rates  # what the trainer logs as learning_rate


def _has_checkpoint(output_dir: str) -> bool:
    from transformers.trainer_utils import get_last_checkpoint

    return Path(output_dir).is_dir() and get_last_checkpoint(output_dir) is not None


def train(args: TrainingArguments) -> Path:
    """
    Train an MVR / CAMVR / snippet-mode model (or a saved one) through sentence-transformers and save it to
    ``args.output_dir`` (load with ``MultiVectorEncoder(output_dir, trust_remote_code=True)``). Under ``torchrun``
    every process calls this; transformers sets up and tears down the process group.
    """
    if args.resume_from == "latest" and not _has_checkpoint(args.output_dir):
        msg = f"resume_from latest: {args.output_dir} has no checkpoint-* folder, so training cannot resume."
        raise FileNotFoundError(msg)
    model = load_model(args)
    layout = snippet_layout(model)
    from haystack_mvr.modeling.encoder_inspection import view_modules

    if any(m.normalize for m in view_modules(model)) and (args.temperature is None or args.temperature >= 0.2):
        logger.warning(
            "This model L2-normalises its views (scores are cosines in [-1, 1]) and the temperature is at least 0.2 "
            "(MVR's Eq. 8 anneals 1 -> 0.3 for inner products): the contrastive signal will be weak. Train with "
            "--no-normalize or a fixed --temperature such as 0.05."
        )
    data = load_examples(args)
    dataset = build_st_dataset(
        data.examples,
        num_negatives=args.num_hard_negatives,
        corpus=data.corpus,
        num_snippets=layout[0] if layout else None,
        first_snippet_view=layout[1] if layout else 1,
        snippet_spans=answer_snippet_spans(model),
        embed_title=args.embed_title,
        title_separator=args.title_separator,
        seed=args.seed,
    )
    logger.info("%s: %d training rows, columns %s", data.description, len(dataset), dataset.column_names)
    trainer = build_trainer(model, args, dataset)
    resume: bool | str | None = True if args.resume_from == "latest" else args.resume_from
    trainer.train(resume_from_checkpoint=resume)
    output = Path(args.output_dir)
    trainer.save_model(str(output))
    if trainer.is_world_process_zero():
        args.to_json(output / ARGS_FILE)
        # the run's log lines (also in checkpoint-*/trainer_state.json) and the plot of the project's old loop
        log = write_log(output / LOG_FILE, [h for h in trainer.state.log_history if "loss" in h])
        try:
            plot_training_log(log, output / PLOT_FILE)
        except ImportError:
            logger.info("No %s: matplotlib is not installed.", PLOT_FILE)
    return output
