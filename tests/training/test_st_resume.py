"""Resuming a stopped run with a larger max_steps: step counter, optimizer state, learning rate and temperature."""

import math

import pytest
import torch

pytest.importorskip("datasets")
pytest.importorskip("sentence_transformers", minversion="6")

from transformers import TrainerCallback

from haystack_mvr.training.st_training import build_trainer, load_model
from tests.training.test_st_viewer_training import arguments, dataset_for

LR = 3e-3


class StepRecorder(TrainerCallback):
    """What each step starts from: the step counter, the epoch, the optimizer's learning rate and Adam step count,
    and the loss's temperature (set by the annealing callback, which runs before this one)."""

    def __init__(self, loss) -> None:
        self.loss = loss
        self.steps: list[dict] = []

    def on_step_begin(self, args, state, control, optimizer=None, **kwargs):
        first = optimizer.param_groups[0]["params"][0]
        adam = optimizer.state.get(first, {})
        self.steps.append(
            {
                "step": state.global_step,
                "epoch": state.epoch,
                "lr": optimizer.param_groups[0]["lr"],
                "adam_steps": int(adam["step"]) if "step" in adam else 0,
                "temperature": self.loss.temperature,
            }
        )


def run(backbone, tmp_path, output, max_steps, resume=False):
    args = arguments(
        backbone,
        tmp_path,
        mode="mvr",
        output_dir=str(tmp_path / output),
        max_steps=max_steps,
        lr=LR,
        temperature=None,  # annealed: tau = max(0.3, exp(-0.1 t)), t the fractional epoch here
        temperature_per_epoch=False,
        batch_size=2,
        save_every=1,
    )
    torch.manual_seed(0)
    model = load_model(args)
    trainer = build_trainer(model, args, dataset_for(model))
    recorder = StepRecorder(trainer.loss)
    trainer.add_callback(recorder)
    trainer.train(resume_from_checkpoint=True if resume else None)
    return trainer, recorder.steps


def test_resume_with_a_larger_max_steps_continues_the_run(trainable_backbone, tmp_path):
    _, straight = run(trainable_backbone, tmp_path, "straight", 6)
    run(trainable_backbone, tmp_path, "stopped", 3)
    trainer, resumed = run(trainable_backbone, tmp_path, "stopped", 6, resume=True)

    assert [s["step"] for s in resumed] == [3, 4, 5]  # continues after checkpoint-3, nothing trained twice
    assert trainer.state.global_step == 6 and (tmp_path / "stopped" / "checkpoint-6").is_dir()
    assert [h["step"] for h in trainer.state.log_history if "loss" in h] == [1, 2, 3, 4, 5, 6]
    assert [s["adam_steps"] for s in resumed] == [3, 4, 5]  # Adam's state came back from the checkpoint
    # the epoch, and with it the annealed temperature, continue where the stopped run was: as in the straight run
    assert [s["epoch"] for s in resumed] == pytest.approx([s["epoch"] for s in straight[3:]])
    assert [s["temperature"] for s in resumed] == pytest.approx([s["temperature"] for s in straight[3:]])
    assert [s["temperature"] for s in resumed] == pytest.approx(
        [max(0.3, math.exp(-0.1 * s["epoch"])) for s in resumed]
    )
    assert resumed[0]["temperature"] < 1.0
    # this run's linear schedule (no warm-up) to 6 steps, from step 3: not the stopped run's last rate (0 at step 3)
    assert [s["lr"] for s in straight] == pytest.approx([LR * (6 - t) / 6 for t in range(6)])
    assert [s["lr"] for s in resumed] == pytest.approx([LR * (6 - t) / 6 for t in (3, 4, 5)])
    logged = {h["step"]: h["learning_rate"] for h in trainer.state.log_history if "loss" in h}
    assert [logged[t + 1] for t in (3, 4, 5)] == pytest.approx([LR * (6 - t) / 6 for t in (3, 4, 5)])
