"""Helpers of the encoder training tests: torchrun on two local processes and toy examples."""

import os
import socket
import subprocess
import sys
from pathlib import Path

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


def toy_examples(words: list[str], text: str, negative_offsets: tuple[int, ...]) -> list:
    """One question per word ("where is the cat?") on its own passage ``text.format(w=word)``; the hard negatives
    are the passages ``negative_offsets`` words further on (so each is another question's positive)."""
    from haystack_mvr.datasets.squad_mv import Passage
    from haystack_mvr.training.data import TrainingExample

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
