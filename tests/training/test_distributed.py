"""Two CPU processes (gloo, DDP): gathered in-batch negatives give the single-process gradient; ranks stay in sync."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from haystack_mvr.modeling import MultiViewEncoder
from haystack_mvr.training.api import build_loss, load_encoder, load_examples, set_seed
from haystack_mvr.training.arguments import TrainingArguments
from haystack_mvr.training.collator import MultiViewCollator
from haystack_mvr.training.data import TrainingDataset
from haystack_mvr.training.distributed import DistributedContext
from haystack_mvr.training.sampler import EpochBatchSampler
from haystack_mvr.training.trainer import MultiViewTrainer

WORDS = ["cat", "dog", "horse", "river", "mountain", "piano", "guitar", "apple", "banana", "train", "ship", "castle"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def toy_squad_mv(directory: Path) -> Path:
    directory.mkdir()
    with (directory / "corpus.jsonl").open("w") as f:
        for w in WORDS:
            f.write(json.dumps({"id": f"{w}#0", "title": w.title(), "text": f"The {w} is here. A {w} again."}) + "\n")
    with (directory / "train.jsonl").open("w") as f:
        for i, w in enumerate(WORDS):
            f.write(
                json.dumps(
                    {
                        "id": f"q{i}",
                        "question": f"where is the {w}?",
                        "answers": [w],
                        "answer_starts": [4],
                        "positive_id": f"{w}#0",
                        "title": w.title(),
                    }
                )
                + "\n"
            )
    return directory


def single_process_gradient(backbone: Path, data_dir: Path, output_dir: Path) -> dict[str, torch.Tensor]:
    """What one process computes on the global batch (the two ranks' micro-batches together)."""
    args = TrainingArguments(
        model=str(backbone),
        data_dir=str(data_dir),
        output_dir=str(output_dir),
        mode="mvr",
        num_views=3,
        doc_max_length=24,
        query_max_length=12,
        batch_size=4,
        num_bm25_negatives=0,
        num_hard_negatives=0,
        progress_bar=False,
    )
    set_seed(args.seed)
    encoder = load_encoder(args)
    dataset = TrainingDataset(load_examples(args).examples, num_hard_negatives=0, seed=args.seed)
    trainer = MultiViewTrainer(
        encoder,
        args,
        dataset,
        MultiViewCollator.from_encoder(encoder),
        build_loss(args, "mvr"),
        context=DistributedContext(),
    )
    sampler = EpochBatchSampler(len(dataset), 4, seed=args.seed)
    sampler.set_epoch(0)
    trainer._micro_step(trainer.collator([dataset[i] for i in next(iter(sampler))]), 1.0, sync=True)
    return {n: p.grad for n, p in encoder.named_parameters() if p.grad is not None}


def test_two_process_gloo_training(trainable_backbone, tmp_path):
    data_dir = toy_squad_mv(tmp_path / "squad")
    out = tmp_path / "out"
    out.mkdir()
    worker = Path(__file__).with_name("ddp_worker.py")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run(
        [sys.executable, str(worker), str(trainable_backbone), str(data_dir), str(out), str(free_port())],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-4000:]

    # Gathered documents + DDP averaging reproduce the single-process gradient of the global batch.
    grads = [torch.load(out / f"grads_{r}.pt") for r in range(2)]
    reference = single_process_gradient(trainable_backbone, data_dir, tmp_path / "single")
    assert grads[0].keys() == reference.keys()
    for name, expected in reference.items():
        torch.testing.assert_close(grads[0][name], grads[1][name], msg=name)
        torch.testing.assert_close(grads[0][name], expected, rtol=1e-4, atol=1e-6, msg=name)

    # After accumulated steps with hard negatives, both ranks hold the same weights, and rank 0 saved them.
    finals = [torch.load(out / f"final_{r}.pt") for r in range(2)]
    for name, value in finals[0].items():
        assert torch.equal(value, finals[1][name]), name
    saved = MultiViewEncoder.from_pretrained(out / "run").state_dict()
    for name, value in finals[0].items():
        assert torch.equal(value, saved[name]), name
    log = [json.loads(line) for line in (out / "run" / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3]
    assert log[0]["examples"] == 2 * 2 * 2  # 2 ranks x 2 micro-batches x batch 2
    assert (out / "run" / "checkpoints" / "step-0000002" / "rng_state_1.pt").is_file()


@pytest.mark.parametrize("rank", [0, 1])
def test_sampler_shards_disjointly(rank):
    samplers = [EpochBatchSampler(10, 2, seed=1, rank=r, world_size=2) for r in range(2)]
    seen = [[i for batch in s for i, _ in batch] for s in samplers]
    assert len(seen[rank]) == 4 and not set(seen[0]) & set(seen[1])
    samplers[rank].set_epoch(0, skip=1)
    assert [b for b in samplers[rank]] == list(EpochBatchSampler(10, 2, seed=1, rank=rank, world_size=2))[1:]
