"""
One process of the MVR / CAMVR DDP test (``test_st_ddp.py``), run under ``torchrun --nproc-per-node 2``.

``python ddp_worker.py BACKBONE OUT_DIR MODE [MODE ...]``: per mode, trains a viewer encoder a few steps through
``load_model`` / ``build_trainer`` (the path of ``train``) and writes, per rank, ``MODE/rank{r}.pt`` (its final
weights) and ``MODE/rank{r}.json`` (what the loss's equation saw each step, the loss's gather flag, the log lines);
rank 0 also saves the model folder ``MODE/model``.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import torch

from haystack_mvr.training.arguments import TrainingArguments
from haystack_mvr.training.data import TrainingExample
from haystack_mvr.training.st_dataset import build_st_dataset
from haystack_mvr.training.st_training import build_trainer, load_model, snippet_layout
from tests.training.conftest import toy_examples

WORDS = ["cat", "dog", "horse", "river", "piano", "apple", "ship", "castle"]
STEPS = 3  # 8 questions / (2 processes x 2) = 2 steps an epoch: the third starts the second epoch
BATCH = 2


def examples() -> list[TrainingExample]:
    return toy_examples(WORDS, "Nothing happens. The {w} is here. A {w} again.", (3,))


def fingerprint(vectors: torch.Tensor) -> list[float]:
    """One number per row of ``(N, K, d)`` vectors (a fixed projection, summed over the views)."""
    weights = torch.linspace(-1.0, 1.0, vectors.shape[-1], dtype=torch.float64)
    return (vectors.detach().double() @ weights).sum(dim=1).tolist()


def train(backbone: str, out: Path, mode: str) -> None:
    args = TrainingArguments(
        model=backbone,
        data_dir="unused",
        output_dir=str(out / "run"),
        mode=mode,
        num_views=3,
        batch_size=BATCH,
        max_steps=STEPS,
        lr=3e-3,
        warmup_ratio=0.0,
        log_every=1,
        progress_bar=False,
        doc_max_length=32,
        query_max_length=12,
        device="cpu",
        temperature_per_epoch=False,  # the temperature moves every step: both ranks must anneal alike
    )
    torch.manual_seed(0)
    model = load_model(args)
    layout = snippet_layout(model)
    dataset = build_st_dataset(
        examples(),
        num_negatives=1,
        num_snippets=layout[0] if layout else None,
        first_snippet_view=layout[1] if layout else 1,
    )
    trainer = build_trainer(model, args, dataset, save_strategy="no")
    loss = trainer.loss
    seen: list[dict] = []
    # the loss's module calls its equation (global_local_loss or answer_view_loss) by this module-level name
    losses_module = importlib.import_module(type(loss).__module__)
    equation_name = "answer_view_loss" if hasattr(losses_module, "answer_view_loss") else "global_local_loss"
    parts = getattr(losses_module, equation_name)

    def recording_parts(query, doc_views, view_mask, positive_index, *rest):
        *answer_view, temperature, exclude = rest  # (answer_view,) for CAMVR's loss
        seen.append(
            {
                "queries": query.shape[0],
                "documents": doc_views.shape[0],
                "positive_index": positive_index.tolist(),
                # a fingerprint of each row: both processes must see the same gathered documents
                "doc_views": fingerprint(doc_views),
                "query": fingerprint(query[:, None]),
                "temperature": temperature,
                "excluded": None if exclude is None else exclude.nonzero().tolist(),
                **({"answer_view": answer_view[0].tolist()} if answer_view else {}),
            }
        )
        return parts(query, doc_views, view_mask, positive_index, *rest)

    setattr(losses_module, equation_name, recording_parts)
    trainer.train()
    rank = trainer.args.process_index
    target = out / mode
    target.mkdir(parents=True, exist_ok=True)
    torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, target / f"rank{rank}.pt")
    record = {
        "world_size": trainer.args.world_size,
        "gather_across_devices": loss.gather_across_devices,
        "steps": seen,
        "log": [h for h in trainer.state.log_history if "loss" in h],
        "global_step": trainer.state.global_step,
    }
    (target / f"rank{rank}.json").write_text(json.dumps(record))
    trainer.save_model(str(target / "model"))


def main() -> None:
    backbone, out, *modes = sys.argv[1:]
    for mode in modes:
        train(backbone, Path(out), mode)


if __name__ == "__main__":
    main()
