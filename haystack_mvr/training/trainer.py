"""The training loop: AdamW with linear warm-up/decay, mixed precision, accumulation, DDP, resumable checkpoints."""

from __future__ import annotations

import contextlib
import json
import logging
import random
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from tqdm.auto import tqdm

from haystack_mvr.training.arguments import TrainingArguments
from haystack_mvr.training.collator import MultiViewCollator, TrainingBatch
from haystack_mvr.training.data import TrainingDataset
from haystack_mvr.training.distributed import (
    DistributedContext,
    gather_no_grad,
    gather_with_grad,
    init_distributed,
    max_over_processes,
    mean_over_processes,
    pad_rows,
)
from haystack_mvr.training.losses import AnswerViewLoss, GlobalLocalLoss, LossOutput, annealed_temperature
from haystack_mvr.training.plotting import plot_training_log
from haystack_mvr.training.sampler import EpochBatchSampler

logger = logging.getLogger(__name__)

__all__ = ["MultiViewTrainer", "find_latest_checkpoint", "resolve_checkpoint"]

CHECKPOINT_DIR = "checkpoints"
STATE_FILE = "trainer_state.pt"
LOG_FILE = "train_log.jsonl"
PLOT_FILE = "train_plot.png"
ARGS_FILE = "training_args.json"


class _TrainingForward(nn.Module):
    """Queries and documents through the encoder in one ``forward`` (what DDP wraps)."""

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, queries, documents) -> tuple[Tensor, Tensor, Tensor]:
        query = self.encoder.embed_queries(queries)
        views, mask = self.encoder.embed_documents(documents)
        return query, views, mask


def find_latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The newest complete checkpoint (one with ``trainer_state.pt``) under ``output_dir/checkpoints``."""
    root = Path(output_dir) / CHECKPOINT_DIR
    complete = [p for p in root.glob("step-*") if (p / STATE_FILE).is_file()] if root.is_dir() else []
    return max(complete, key=lambda p: int(p.name.split("-")[1]), default=None)


def resolve_checkpoint(resume_from: str | None, output_dir: str | Path) -> Path | None:
    """``resume_from`` as a checkpoint directory: ``"latest"`` picks the newest in ``output_dir``."""
    if resume_from is None:
        return None
    path = find_latest_checkpoint(output_dir) if resume_from == "latest" else Path(resume_from)
    if path is None or not (path / STATE_FILE).is_file():
        where = f"{output_dir}/{CHECKPOINT_DIR}" if resume_from == "latest" else resume_from
        msg = f"No complete checkpoint (with {STATE_FILE}) at {where}; cannot resume."
        raise FileNotFoundError(msg)
    return path


def _rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class MultiViewTrainer:
    """
    Trains a :class:`~haystack_mvr.modeling.MultiViewEncoder` with a multi-view contrastive loss.

    - **Optimiser**: AdamW (no weight decay on biases and LayerNorm), linear warm-up then linear decay to 0,
      gradient clipping at ``max_grad_norm``.
    - **Temperature**: a fixed ``temperature`` or MVR Eq. 8 on the epoch count (see :func:`annealed_temperature`).
    - **Precision**: bf16 autocast on CUDA by default, fp32 on CPU; fp16 uses a gradient scaler. Losses are
      computed in fp32.
    - **Accumulation**: ``grad_accumulation`` micro-batches per optimiser step; each micro-batch's loss is divided
      by their number and back-propagated at once, so a query's negatives are the documents of its own micro-batch
      (no GradCache).
    - **Distributed** (``torchrun``, ``WORLD_SIZE > 1``): DDP averages gradients; every process's document views are
      all-gathered with a gradient-preserving ``all_gather`` so that each query is contrasted with the documents of
      all processes (the same loss as one process with the global batch). Queries are not gathered: they are never
      negatives, and each process's loss over its own queries, averaged by DDP, is the global mean. A passage that
      is a query's known positive is never its negative, whichever process it comes from; a passage that two
      processes both draw as a hard negative appears twice in the denominator.
    - **Checkpoints** (``output_dir/checkpoints/step-N``): model, optimiser, scheduler, scaler, step and every
      process's RNG state; resuming continues exactly where the run stopped (the data order and the negatives drawn
      depend only on seed, epoch and example).
    - **Logs**: ``train_log.jsonl`` (step, loss and its global/local parts, tau, lr, gradient norm, how often each
      view wins for the positive, and for CAMVR how often the best view is the answer view); ``train_plot.png``
      at the end; the final model is ``save_pretrained(output_dir)``.

    ```python
    trainer = MultiViewTrainer(encoder, args, dataset, collator, GlobalLocalLoss(lambda_local=0.01))
    trainer.train()   # -> output_dir
    ```
    """

    def __init__(
        self,
        encoder: nn.Module,
        args: TrainingArguments,
        dataset: TrainingDataset,
        collator: MultiViewCollator,
        loss_fn: GlobalLocalLoss | AnswerViewLoss,
        *,
        context: DistributedContext | None = None,
    ) -> None:
        self.args = args
        self.encoder = encoder
        self.dataset = dataset
        self.collator = collator
        self.loss_fn = loss_fn
        self.ctx = context or init_distributed()
        self.device = self._resolve_device()
        self.output_dir = Path(args.output_dir)
        self.num_views = int(encoder.config.max_views)

        encoder.to(self.device)
        encoder.train()
        if args.gradient_checkpointing:
            encoder.gradient_checkpointing_enable()
        forward = _TrainingForward(encoder)
        if self.ctx.enabled:
            device_ids = [self.device.index] if self.device.type == "cuda" else None
            self.model: nn.Module = DistributedDataParallel(forward, device_ids=device_ids)
        else:
            self.model = forward

        self.sampler = EpochBatchSampler(
            len(dataset), args.batch_size, seed=args.seed, rank=self.ctx.rank, world_size=self.ctx.world_size
        )
        self.steps_per_epoch = len(self.sampler) // args.grad_accumulation
        if self.steps_per_epoch < 1:
            msg = (
                f"One epoch has {len(self.sampler)} micro-batches per process, fewer than grad_accumulation "
                f"({args.grad_accumulation}): lower batch_size or grad_accumulation."
            )
            raise ValueError(msg)
        self.total_steps = args.max_steps or args.epochs * self.steps_per_epoch
        self.optimizer = self._build_optimizer()
        warmup = args.warmup_steps if args.warmup_steps is not None else int(args.warmup_ratio * self.total_steps)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, _linear_schedule(warmup, self.total_steps))
        self.autocast_dtype = self._resolve_precision()
        self.scaler = torch.amp.GradScaler("cuda") if self.autocast_dtype is torch.float16 else None
        self.global_step = 0
        self._stats = _Stats(self.num_views)
        torch.manual_seed(args.seed + 1000 * self.ctx.rank)  # dropout differs per process, reproducibly

    # ------------------------------------------------------------------------------------------ setup
    def _resolve_device(self) -> torch.device:
        if self.args.device:
            return torch.device(self.args.device)
        if torch.cuda.is_available():
            return torch.device("cuda", self.ctx.local_rank)
        return torch.device("cpu")

    def _resolve_precision(self) -> torch.dtype | None:
        precision, cuda = self.args.precision, self.device.type == "cuda"
        if precision == "auto":
            return torch.bfloat16 if cuda and torch.cuda.is_bf16_supported() else None
        if precision == "fp16" and not cuda:
            msg = "fp16 training needs a CUDA device; use precision bf16 or fp32 on CPU."
            raise ValueError(msg)
        return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]

    def _build_optimizer(self) -> torch.optim.Optimizer:
        decay, no_decay = [], []
        for name, param in self.encoder.named_parameters():
            if param.requires_grad:
                (no_decay if param.ndim < 2 or "LayerNorm" in name or "norm" in name.lower() else decay).append(param)
        groups = [{"params": decay, "weight_decay": self.args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=self.args.lr)

    # ---------------------------------------------------------------------------------------- helpers
    @property
    def epoch_progress(self) -> float:
        """Completed optimiser steps in epochs (``1.5``: halfway through the second epoch)."""
        return self.global_step / self.steps_per_epoch

    def temperature(self) -> float:
        """The current ``tau``: fixed, or MVR Eq. 8 on the epoch count."""
        if self.args.temperature is not None:
            return float(self.args.temperature)
        return annealed_temperature(
            self.epoch_progress,
            self.args.temperature_alpha,
            self.args.temperature_min,
            per_epoch=self.args.temperature_per_epoch,
        )

    def _autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    def _loader(self) -> DataLoader:
        return DataLoader(
            self.dataset,
            batch_sampler=self.sampler,
            collate_fn=self.collator,
            num_workers=self.args.num_workers,
            pin_memory=self.device.type == "cuda",
            generator=torch.Generator().manual_seed(self.args.seed),  # leaves the global RNG alone
        )

    # --------------------------------------------------------------------------------------- one step
    def compute_loss(self, batch: TrainingBatch, temperature: float) -> tuple[LossOutput, Tensor]:
        """Encode a micro-batch, gather documents over processes and apply the loss; returns it and answer views."""
        with self._autocast():
            query, views, mask = self.model(batch.queries, batch.documents)
        query, views = query.float(), views.float()
        positive_index = batch.positive_index.to(self.device)
        answer_view = batch.answer_view.to(self.device)
        doc_keys = batch.doc_keys.to(self.device)
        valid = torch.ones(views.shape[0], dtype=torch.bool, device=self.device)
        if self.ctx.enabled:
            rows = max_over_processes(views.shape[0], self.device)
            views = gather_with_grad(pad_rows(views, rows))
            mask = torch.cat(gather_no_grad(pad_rows(mask.to(torch.uint8), rows))).bool()
            doc_keys = torch.cat(gather_no_grad(pad_rows(doc_keys, rows)))
            valid = torch.cat(gather_no_grad(pad_rows(valid.to(torch.uint8), rows))).bool()
            positive_index = positive_index + self.ctx.rank * rows
        positive_keys = batch.positive_keys.to(self.device)
        exclude = (doc_keys[None, :, None] == positive_keys[:, None, :]).any(-1) | ~valid[None, :]
        exclude[torch.arange(len(positive_index), device=self.device), positive_index] = False
        if isinstance(self.loss_fn, AnswerViewLoss):
            out = self.loss_fn.compute(query, views, mask, positive_index, answer_view, temperature, exclude)
        else:
            out = self.loss_fn.compute(query, views, mask, positive_index, temperature, exclude)
        return out, answer_view

    def _micro_step(self, batch: TrainingBatch, temperature: float, sync: bool) -> None:
        no_sync = self.model.no_sync() if self.ctx.enabled and not sync else contextlib.nullcontext()
        with no_sync:
            out, answer_view = self.compute_loss(batch, temperature)
            loss = out.loss / self.args.grad_accumulation
            (self.scaler.scale(loss) if self.scaler else loss).backward()
        self._stats.add(out, answer_view, len(batch))

    def _optimizer_step(self) -> float:
        if self.scaler:
            self.scaler.unscale_(self.optimizer)
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        max_norm = self.args.max_grad_norm if self.args.max_grad_norm > 0 else float("inf")
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm))
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.global_step += 1
        return grad_norm

    # ------------------------------------------------------------------------------------------ train
    def train(self, resume_from: str | Path | None = None) -> Path:
        """
        Run to ``max_steps`` or the last epoch, then save the model to ``output_dir``.

        :param resume_from: A checkpoint directory to continue from (its model weights must already be loaded
            into the encoder, as :func:`haystack_mvr.training.train` does); default ``args.resume_from``.
        :returns: ``output_dir``.
        """
        args = self.args
        checkpoint = Path(resume_from) if resume_from else resolve_checkpoint(args.resume_from, self.output_dir)
        if self.ctx.is_main:
            self.output_dir.mkdir(parents=True, exist_ok=True)
            args.to_json(self.output_dir / ARGS_FILE)
            if checkpoint is None:  # a fresh run starts a fresh log; a resumed one appends to it
                (self.output_dir / LOG_FILE).unlink(missing_ok=True)
        if checkpoint is not None:
            self.load_state(checkpoint)
        self._barrier()
        accum = args.grad_accumulation
        epoch = self.global_step // self.steps_per_epoch
        skip = (self.global_step % self.steps_per_epoch) * accum
        progress = tqdm(
            total=self.total_steps,
            initial=self.global_step,
            desc="Training",
            unit="step",
            disable=not (self.ctx.is_main and args.progress_bar),
        )
        start_time, last_saved = time.time(), -1
        grad_norm = 0.0
        while self.global_step < self.total_steps:
            self.sampler.set_epoch(epoch, skip)
            micro_in_epoch = self.steps_per_epoch * accum - skip  # leftover micro-batches never reach backward
            for micro, batch in enumerate(self._loader()):
                if micro >= micro_in_epoch:
                    break
                sync = (micro + 1) % accum == 0
                self._micro_step(batch, self.temperature(), sync)
                if not sync:
                    continue
                tau = self.temperature()
                grad_norm = self._optimizer_step()
                progress.update(1)
                if self.global_step % args.log_every == 0 or self.global_step == self.total_steps:
                    record = self._log(tau, grad_norm, time.time() - start_time)
                    progress.set_postfix(loss=f"{record['loss']:.4f}", tau=f"{tau:.3f}")
                if args.save_every and self.global_step % args.save_every == 0:
                    self.save_checkpoint()
                    last_saved = self.global_step
                if self.global_step >= self.total_steps:
                    break
            epoch, skip = epoch + 1, 0
            if args.save_every is None and last_saved != self.global_step:
                self.save_checkpoint()
                last_saved = self.global_step
        progress.close()
        self._finish()
        return self.output_dir

    def _finish(self) -> None:
        if self.ctx.is_main:
            self.encoder.save_pretrained(self.output_dir)
            plot = plot_training_log(self.output_dir / LOG_FILE, self.output_dir / PLOT_FILE)
            logger.info("Saved the model to %s (plot: %s)", self.output_dir, plot)
        self._barrier()

    def _barrier(self) -> None:
        if self.ctx.enabled:
            torch.distributed.barrier()

    # ---------------------------------------------------------------------------------------- logging
    def _log(self, temperature: float, grad_norm: float, elapsed: float) -> dict[str, Any]:
        summary = self._stats.pop(self.device, self.ctx)
        record = {
            "step": self.global_step,
            "epoch": round(self.epoch_progress, 4),
            **summary,
            "temperature": temperature,
            "lr": self.scheduler.get_last_lr()[0],
            "grad_norm": grad_norm,
            "elapsed_s": round(elapsed, 2),
        }
        if self.ctx.is_main:
            with (self.output_dir / LOG_FILE).open("a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
        return record

    # ------------------------------------------------------------------------------------ checkpoints
    def save_checkpoint(self) -> Path:
        """Write ``output_dir/checkpoints/step-N`` (complete once ``trainer_state.pt`` exists) and prune old ones."""
        path = self.output_dir / CHECKPOINT_DIR / f"step-{self.global_step:07d}"
        if self.ctx.is_main:
            path.mkdir(parents=True, exist_ok=True)
            self.encoder.save_pretrained(path)
        self._barrier()
        torch.save(_rng_state(), path / f"rng_state_{self.ctx.rank}.pt")
        self._barrier()
        if self.ctx.is_main:
            state = {
                "global_step": self.global_step,
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(),
                "scaler": self.scaler.state_dict() if self.scaler else None,
                "world_size": self.ctx.world_size,
                "args": self.args.to_dict(),
            }
            torch.save(state, path / (STATE_FILE + ".tmp"))
            (path / (STATE_FILE + ".tmp")).replace(path / STATE_FILE)
            self._prune_checkpoints()
        self._barrier()
        return path

    def _prune_checkpoints(self) -> None:
        limit = self.args.save_total_limit
        if not limit:
            return
        root = self.output_dir / CHECKPOINT_DIR
        complete = sorted(
            (p for p in root.glob("step-*") if (p / STATE_FILE).is_file()), key=lambda p: int(p.name.split("-")[1])
        )
        for old in complete[:-limit]:
            shutil.rmtree(old, ignore_errors=True)

    def load_state(self, checkpoint: str | Path) -> None:
        """Restore optimiser, scheduler, scaler, step and RNG state (the weights come with the encoder)."""
        checkpoint = Path(checkpoint)
        state = torch.load(checkpoint / STATE_FILE, map_location=self.device, weights_only=False)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        # The schedule is this run's (e.g. a longer max_steps): set the learning rate it gives at the saved step.
        schedule = zip(self.optimizer.param_groups, self.scheduler.base_lrs, self.scheduler.lr_lambdas, strict=True)
        for group, base_lr, factor in schedule:
            group["lr"] = base_lr * factor(self.scheduler.last_epoch)
        self.scheduler._last_lr = [group["lr"] for group in self.optimizer.param_groups]
        if self.scaler and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self.global_step = int(state["global_step"])
        rng_file = checkpoint / f"rng_state_{self.ctx.rank}.pt"
        if rng_file.is_file() and state.get("world_size") == self.ctx.world_size:
            _set_rng_state(torch.load(rng_file, weights_only=False))
        else:
            logger.warning(
                "No RNG state for rank %d in %s: dropout will not replay exactly.", self.ctx.rank, checkpoint
            )
            torch.manual_seed(self.args.seed + 1000 * self.ctx.rank + self.global_step)
        logger.info("Resumed from %s at step %d", checkpoint, self.global_step)


class _Stats:
    """Loss parts and view-win counts since the last log line."""

    def __init__(self, num_views: int) -> None:
        self.num_views = num_views
        self.reset()

    def reset(self) -> None:
        self.sums = torch.zeros(3, dtype=torch.float64)  # loss, global, local (per micro-batch means)
        self.micro = 0
        self.wins = torch.zeros(self.num_views, dtype=torch.float64)
        self.answer = torch.zeros(2, dtype=torch.float64)  # answer view known, best view == answer view
        self.examples = 0

    def add(self, out: LossOutput, answer_view: Tensor, batch_size: int) -> None:
        parts = torch.stack([out.loss.detach(), out.global_loss, out.local_loss]).double().cpu()
        self.sums += parts
        self.micro += 1
        winning = out.winning_view.cpu()
        self.wins += torch.bincount(winning, minlength=self.num_views)[: self.num_views].double()
        known = answer_view.cpu() >= 0
        self.answer += torch.tensor(
            [known.sum().item(), (winning[known] == answer_view.cpu()[known]).sum().item()], dtype=torch.float64
        )
        self.examples += batch_size

    def pop(self, device: torch.device, ctx: DistributedContext) -> dict[str, Any]:
        means = self.sums / max(self.micro, 1)
        totals = torch.cat([self.wins, self.answer, torch.tensor([float(self.examples)], dtype=torch.float64)])
        if ctx.enabled:
            means = mean_over_processes(means.to(device)).cpu()
            totals = totals.to(device)
            torch.distributed.all_reduce(totals)
            totals = totals.cpu()
        wins, answer = totals[: self.num_views], totals[self.num_views : self.num_views + 2]
        record = {
            "loss": float(means[0]),
            "global_loss": float(means[1]),
            "local_loss": float(means[2]),
            "view_wins": [int(w) for w in wins.tolist()],
            "examples": int(totals[-1]),
        }
        if answer[0] > 0:
            record["answer_view_agreement"] = float(answer[1] / answer[0])
        self.reset()
        return record


def _linear_schedule(warmup: int, total: int):
    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / (warmup + 1)
        return max(0.0, (total - step) / max(1, total - warmup))

    return factor
