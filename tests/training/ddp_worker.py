"""Run by test_distributed.py: two CPU processes (gloo) train through DDP; each writes what the test compares.

Usage: python ddp_worker.py <backbone> <squad-mv dir> <output dir> <port>
"""

import os
import sys
from pathlib import Path

import torch
import torch.multiprocessing as mp

WORLD_SIZE = 2


def worker(rank: int, backbone: str, data_dir: str, out: str, port: str) -> None:
    os.environ.update(
        WORLD_SIZE=str(WORLD_SIZE), RANK=str(rank), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=port
    )
    torch.set_num_threads(1)
    from haystack_mvr.training.api import build_loss, load_encoder, load_examples, set_seed, train
    from haystack_mvr.training.arguments import TrainingArguments
    from haystack_mvr.training.collator import MultiViewCollator
    from haystack_mvr.training.data import TrainingDataset
    from haystack_mvr.training.distributed import init_distributed
    from haystack_mvr.training.trainer import MultiViewTrainer

    common = {
        "model": backbone,
        "data_dir": data_dir,
        "mode": "mvr",
        "num_views": 3,
        "doc_max_length": 24,
        "query_max_length": 12,
        "batch_size": 2,
        "progress_bar": False,
        "log_every": 1,
    }
    context = init_distributed()
    assert context.world_size == WORLD_SIZE and context.rank == rank

    # 1. One micro-step without hard negatives: the gradient that DDP leaves on each rank.
    args = TrainingArguments(**common, output_dir=f"{out}/grad", num_bm25_negatives=0, num_hard_negatives=0, lr=1e-3)
    set_seed(args.seed)
    encoder = load_encoder(args)
    dataset = TrainingDataset(load_examples(args).examples, num_hard_negatives=0, seed=args.seed)
    trainer = MultiViewTrainer(
        encoder, args, dataset, MultiViewCollator.from_encoder(encoder), build_loss(args, "mvr"), context=context
    )
    trainer.sampler.set_epoch(0)
    batch = trainer.collator([dataset[i] for i in next(iter(trainer.sampler))])
    trainer._micro_step(batch, 1.0, sync=True)
    grads = {n: p.grad.clone() for n, p in encoder.named_parameters() if p.grad is not None}
    torch.save(grads, Path(out) / f"grads_{rank}.pt")

    # 2. A short run through the public API (BM25 hard negatives, gradient accumulation); keep its trainer.
    import haystack_mvr.training.api as api

    trainers = []

    class Recording(MultiViewTrainer):
        def train(self, *a, **kw):
            trainers.append(self)
            return super().train(*a, **kw)

    api.MultiViewTrainer = Recording
    args = TrainingArguments(
        **common,
        output_dir=f"{out}/run",
        max_steps=3,
        grad_accumulation=2,
        num_bm25_negatives=3,
        bm25_depth=10,
        save_every=2,
        lr=1e-3,
    )
    train(args)
    torch.save(trainers[0].encoder.state_dict(), Path(out) / f"final_{rank}.pt")
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    backbone, data_dir, out, port = sys.argv[1:5]
    mp.spawn(worker, args=(backbone, data_dir, out, port), nprocs=WORLD_SIZE, join=True)
