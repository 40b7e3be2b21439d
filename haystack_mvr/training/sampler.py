"""Per-epoch shuffled batches, sharded over processes and resumable mid-epoch."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.utils.data import Sampler


class EpochBatchSampler(Sampler[list[tuple[int, int]]]):
    """
    Yields this process's micro-batches of one epoch as lists of ``(example index, epoch)`` pairs.

    The order is a permutation seeded by ``(seed, epoch)``, the same on every process; process ``rank`` takes every
    ``world_size``-th batch, so the processes together see each example at most once per epoch. The incomplete
    last round of batches is dropped (every process takes the same number of steps).

    :param num_examples: Dataset size.
    :param batch_size: Examples per micro-batch and process.
    :param seed: Shuffling seed.
    :param rank: This process's rank.
    :param world_size: Number of processes.
    """

    def __init__(self, num_examples: int, batch_size: int, *, seed: int = 42, rank: int = 0, world_size: int = 1):
        if num_examples < batch_size * world_size:
            msg = (
                f"{num_examples} training examples cannot fill one batch of {batch_size} on each of {world_size} "
                "process(es): lower batch_size."
            )
            raise ValueError(msg)
        self.num_examples = num_examples
        self.batch_size = batch_size
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.epoch = 0
        self.skip = 0

    def set_epoch(self, epoch: int, skip: int = 0) -> None:
        """Select the epoch to iterate, skipping its first ``skip`` micro-batches (resuming mid-epoch)."""
        self.epoch = epoch
        self.skip = skip

    def __len__(self) -> int:
        """Micro-batches per epoch and process (before ``skip``)."""
        return self.num_examples // (self.batch_size * self.world_size)

    def __iter__(self) -> Iterator[list[tuple[int, int]]]:
        generator = torch.Generator().manual_seed(self.seed + 1_000_003 * self.epoch)
        order = torch.randperm(self.num_examples, generator=generator).tolist()
        for step in range(self.skip, len(self)):
            start = (step * self.world_size + self.rank) * self.batch_size
            yield [(i, self.epoch) for i in order[start : start + self.batch_size]]
