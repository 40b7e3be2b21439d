"""The training loop on a tiny random model: the loss goes down, resuming is exact, checkpoints reload."""

import json

import numpy as np
import pytest
import torch

from haystack_mvr.modeling import MultiViewEncoder
from haystack_mvr.training.arguments import TrainingArguments
from haystack_mvr.training.collator import MultiViewCollator
from haystack_mvr.training.data import Passage, TrainingDataset, TrainingExample
from haystack_mvr.training.losses import AnswerViewLoss, GlobalLocalLoss
from haystack_mvr.training.trainer import MultiViewTrainer, find_latest_checkpoint

WORDS = [
    "cat",
    "dog",
    "horse",
    "river",
    "mountain",
    "piano",
    "guitar",
    "apple",
    "banana",
    "train",
    "ship",
    "castle",
    "forest",
    "desert",
    "island",
    "rocket",
]


def toy_examples() -> list[TrainingExample]:
    passages = [
        Passage(f"p{i}", w.title(), f"The {w} is here. Nothing else happens. A {w} again.") for i, w in enumerate(WORDS)
    ]
    examples = []
    for i, w in enumerate(WORDS):
        pool = (passages[(i + 1) % len(WORDS)], passages[(i + 5) % len(WORDS)])
        examples.append(
            TrainingExample(
                f"q{i}", f"where is the {w}?", passages[i], (w,), passages[i].text.rindex(w), hard_negatives=pool
            )
        )
    return examples


def make_trainer(backbone, output_dir, *, mode="mvr", checkpoint=None, **overrides) -> MultiViewTrainer:
    options = {
        "model": str(backbone),
        "data_dir": "unused",
        "output_dir": str(output_dir),
        "mode": mode,
        "num_views": 3,
        "batch_size": 4,
        "lr": 1e-3,
        "warmup_ratio": 0.0,
        "log_every": 1,
        "progress_bar": False,
        "num_bm25_negatives": 0,
        "doc_max_length": 24,
        "query_max_length": 12,
        **overrides,
    }
    args = TrainingArguments(**options)
    torch.manual_seed(args.seed)
    source = checkpoint or backbone
    keys = ("mode", "num_views", "doc_max_length", "query_max_length") if checkpoint is None else ()
    encoder = MultiViewEncoder.from_pretrained(source, **{k: options[k] for k in keys})
    dataset = TrainingDataset(toy_examples(), num_hard_negatives=1, seed=args.seed)
    loss = AnswerViewLoss() if mode == "camvr" else GlobalLocalLoss(lambda_local=0.01)
    return MultiViewTrainer(encoder, args, dataset, MultiViewCollator.from_encoder(encoder), loss)


def eval_loss(trainer: MultiViewTrainer) -> float:
    """Loss on all 16 examples in one batch, eval mode (no dropout), fixed negatives."""
    batch = trainer.collator([trainer.dataset[(i, 0)] for i in range(len(trainer.dataset))])
    trainer.encoder.eval()
    with torch.no_grad():
        out, _ = trainer.compute_loss(batch, 1.0)
    trainer.encoder.train()
    return out.loss.item()


@pytest.mark.parametrize("mode", ["mvr", "camvr", "snippet"])
def test_a_few_steps_lower_the_loss(trainable_backbone, tmp_path, mode):
    trainer = make_trainer(trainable_backbone, tmp_path, mode=mode, max_steps=12, batch_size=8, lr=3e-3)
    before = eval_loss(trainer)
    trainer.train()
    after = eval_loss(trainer)
    assert after < before - 0.1 and after < np.log(16)  # better than uniform over the 16 documents
    log = [json.loads(line) for line in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 13))
    assert {"loss", "global_loss", "local_loss", "temperature", "lr", "view_wins"} <= set(log[0])
    assert sum(log[0]["view_wins"]) == 8 and len(log[0]["view_wins"]) == (4 if mode == "snippet" else 3)  # +global
    assert ("answer_view_agreement" in log[0]) == (mode != "mvr")  # modes with snippet spans
    assert (tmp_path / "train_plot.png").stat().st_size > 1000
    # snippet mode saves the sentence-transformers format (modules.json), mvr / camvr the project's own
    saved = "modules.json" if mode == "snippet" else "multi_view_config.json"
    assert (tmp_path / saved).is_file() and (tmp_path / "training_args.json").is_file()


def test_resume_continues_exactly(tiny_backbone, tmp_path):
    straight = make_trainer(tiny_backbone, tmp_path / "a", max_steps=6, save_every=3, grad_accumulation=2, batch_size=2)
    straight.train()
    assert straight.steps_per_epoch == 4  # 16 examples / 2 per micro-batch / 2 micro-batches per step
    checkpoint = tmp_path / "a" / "checkpoints" / "step-0000003"
    assert find_latest_checkpoint(tmp_path / "a").name == "step-0000006"

    resumed = make_trainer(
        tiny_backbone,
        tmp_path / "b",
        checkpoint=checkpoint,
        max_steps=6,
        save_every=3,
        grad_accumulation=2,
        batch_size=2,
    )
    resumed.train(resume_from=checkpoint)
    assert resumed.global_step == 6
    for (name, a), b in zip(straight.encoder.state_dict().items(), resumed.encoder.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert resumed.scheduler.get_last_lr() == straight.scheduler.get_last_lr()


def test_saved_model_reloads_with_identical_embeddings(tiny_backbone, tmp_path):
    trainer = make_trainer(tiny_backbone, tmp_path, mode="camvr", max_steps=2)
    trainer.train()
    reloaded = MultiViewEncoder.from_pretrained(tmp_path)
    assert reloaded.config == trainer.encoder.config
    texts = ["The cat is here. Nothing else happens.", "A rocket flies."]
    for a, b in zip(trainer.encoder.encode_documents(texts), reloaded.encode_documents(texts), strict=True):
        np.testing.assert_allclose(a.views, b.views, rtol=1e-5, atol=1e-6)
        assert a.spans == b.spans
    np.testing.assert_allclose(
        trainer.encoder.encode_queries(["cat?"]), reloaded.encode_queries(["cat?"]), rtol=1e-5, atol=1e-6
    )


def test_temperature_follows_the_epoch(tiny_backbone, tmp_path):
    trainer = make_trainer(tiny_backbone, tmp_path, epochs=3, temperature_alpha=0.5, save_total_limit=1)
    trainer.train()
    log = [json.loads(line) for line in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    taus = {r["step"]: r["temperature"] for r in log}
    assert taus[1] == taus[4] == 1.0  # 4 steps per epoch
    assert taus[5] == pytest.approx(np.exp(-0.5)) and taus[9] == pytest.approx(np.exp(-1.0))
    assert len(list((tmp_path / "checkpoints").iterdir())) == 1  # one per epoch end, only the newest kept


def test_too_small_data_is_an_error(tiny_backbone, tmp_path):
    with pytest.raises(ValueError, match="batch"):
        make_trainer(tiny_backbone, tmp_path, batch_size=32)


def micro_step_gradients(trainer: MultiViewTrainer) -> dict[str, torch.Tensor]:
    trainer.sampler.set_epoch(0)
    batch = trainer.collator([trainer.dataset[i] for i in next(iter(trainer.sampler))])
    trainer._micro_step(batch, 1.0, sync=True)
    return {n: p.grad.clone() for n, p in trainer.encoder.named_parameters() if p.grad is not None}


def test_gradient_checkpointing_gives_the_same_gradients(trainable_backbone, tmp_path):
    plain = micro_step_gradients(make_trainer(trainable_backbone, tmp_path / "a", mode="camvr"))
    checkpointed = micro_step_gradients(
        make_trainer(trainable_backbone, tmp_path / "b", mode="camvr", gradient_checkpointing=True)
    )
    assert plain.keys() == checkpointed.keys()
    for name, grad in plain.items():
        torch.testing.assert_close(checkpointed[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_bf16_autocast_runs_on_cpu(trainable_backbone, tmp_path):
    trainer = make_trainer(trainable_backbone, tmp_path, precision="bf16", max_steps=2)
    assert trainer.autocast_dtype is torch.bfloat16
    trainer.train()
    log = [json.loads(line) for line in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    assert all(np.isfinite(r["loss"]) for r in log)
    with pytest.raises(ValueError, match="fp16"):
        make_trainer(trainable_backbone, tmp_path / "x", precision="fp16")
