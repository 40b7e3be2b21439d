"""Fixtures of the training tests: the shared squad-mv data and a tiny backbone that learns in a few steps."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]


def torchrun(*arguments: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """``torchrun --nproc-per-node 2`` on a free local port, 1 OpenMP thread a process, this checkout importable."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(port)]
    pythonpath = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": pythonpath}
    return subprocess.run([*command, *arguments], env=env, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="session")
def squad_mv_dir() -> Path:
    path = Path(__file__).resolve().parents[3] / "shared" / "data" / "squad-mv"
    if not (path / "train.jsonl").is_file():
        pytest.skip("the shared squad-mv data is not available")
    return path


@pytest.fixture(scope="session")
def trainable_backbone(tmp_path_factory) -> Path:
    """
    The tiny 2-layer, 32-wide random BERT of ``tiny_backbone``, initialised with std 0.2 and without dropout.

    With the default std 0.02 a random BERT is nearly the identity: each viewer's output is its own token
    embedding, every document scores alike, and a dozen steps cannot show learning. This one learns within a few.
    """
    from transformers import BertModel

    from tests.conftest import minilm_tokenizer, tiny_bert_config

    tokenizer = minilm_tokenizer()
    torch.manual_seed(0)
    config = tiny_bert_config(
        tokenizer,
        max_position_embeddings=128,
        initializer_range=0.2,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    directory = tmp_path_factory.mktemp("trainable-bert")
    BertModel(config, add_pooling_layer=False).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def toy_examples(words: list[str], text: str, negative_offsets: tuple[int, ...]) -> list:
    """One question per word ("where is the cat?") on its own passage ``text.format(w=word)``; the hard negatives
    are the passages ``negative_offsets`` words further on (so each is another question's positive)."""
    from haystack_mvr.training.data import Passage, TrainingExample

    passages = [Passage(f"p{i}", w.title(), text.format(w=w)) for i, w in enumerate(words)]
    return [
        TrainingExample(
            f"q{i}",
            f"where is the {w}?",
            passages[i],
            (w,),
            passages[i].text.index(w),
            hard_negatives=tuple(passages[(i + o) % len(words)] for o in negative_offsets),
        )
        for i, w in enumerate(words)
    ]
