"""What the multi-view losses share (private; sentence-transformers >= 6): a ``MultiVectorEncoder`` batch -> query
vectors and document views, the view scores of their equations, the view statistics and the loss base class."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from sentence_transformers.base.losses.merged_forward import embed_columns_padded
from sentence_transformers.util import all_gather_padded, get_rank, stack_padded_token_embeddings
from torch import Tensor, nn

from haystack_mvr.modeling.scoring import max_over_views, view_scores


def check_inputs(query: Tensor, doc_views: Tensor, view_mask: Tensor, positive_index: Tensor, temperature: float):
    if query.dim() != 2 or doc_views.dim() != 3 or query.shape[1] != doc_views.shape[2]:
        msg = f"Expected query (B, d) and doc_views (N, K, d); got {tuple(query.shape)} and {tuple(doc_views.shape)}."
        raise ValueError(msg)
    if view_mask.shape != doc_views.shape[:2]:
        msg = f"view_mask must be (N, K) = {tuple(doc_views.shape[:2])}, got {tuple(view_mask.shape)}."
        raise ValueError(msg)
    if positive_index.shape != (query.shape[0],):
        msg = f"positive_index must be (B,) = ({query.shape[0]},), got {tuple(positive_index.shape)}."
        raise ValueError(msg)
    if not temperature > 0:
        msg = f"temperature must be positive, got {temperature}."
        raise ValueError(msg)


def scores_and_logits(
    query: Tensor, doc_views: Tensor, view_mask: Tensor, temperature: float, exclude: Tensor | None
) -> tuple[Tensor, Tensor]:
    """
    :returns: view scores ``(B, N, K)`` (float32) and aggregated logits ``max_i f_i(q, d) / tau`` ``(B, N)`` with
        excluded pairs at ``-inf``.
    """
    scores = view_scores(query.float(), doc_views.float())
    best, _ = max_over_views(scores, view_mask[None].bool())
    logits = best / temperature
    if exclude is not None:
        logits = logits.masked_fill(exclude.bool(), float("-inf"))
    return scores, logits


def positive_view_scores(scores: Tensor, view_mask: Tensor, positive_index: Tensor) -> Tensor:
    """The positive document's view scores ``f_i(q, d+)`` ``(B, K)``, padding views at ``-inf``."""
    rows = torch.arange(scores.shape[0], device=scores.device)
    own = scores[rows, positive_index]  # (B, K)
    return own.masked_fill(~view_mask[positive_index].bool(), float("-inf"))


def embed_views(
    model: nn.Module,
    sentence_features: Iterable[dict[str, Any]],
    *,
    mini_batch_size: int | None = None,
    gather_across_devices: bool = False,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor | None]:
    """
    Embed a ``(query, positive, negative_1, ..., negative_n)`` batch of a ``MultiVectorEncoder`` trainer.

    Column 0 runs under the ``query`` task and must give one vector per query (MVR scores a query by one vector);
    the other columns run under the ``document`` task and give each document its views, padding views masked.

    :param model: The ``MultiVectorEncoder`` (or its DDP wrapper).
    :param sentence_features: One feature dict per column, as sentence-transformers' trainer hands them to a loss.
    :param mini_batch_size: Rows per document forward (sentence-transformers' ``embed_columns_padded``).
    :param gather_across_devices: Gather the documents of every process (DDP) as negatives for every query.
    :returns: ``query (B, d)``, ``doc_views (C * B', K, d)``, ``view_mask (C * B', K)``, ``positive_index (B,)``
        and ``exclude`` (``(B, C * B')`` bool or ``None``), the documents column by column (all positives first),
        ``B'`` the batch over all processes when gathering. ``exclude`` is set only when gathering: another
        process's copies of a query's own positive (:func:`copies_of_positives`), left out of its denominator.
    :raises ValueError: if the batch has no document column or a query has more than one vector.
    """
    features = [dict(f) for f in sentence_features]
    if len(features) < 2:
        msg = "A multi-view loss needs (query, positive[, negative_1, ...]) columns; got one column."
        raise ValueError(msg)
    query_features = features[0]
    out = model(query_features, task=query_features.get("task", "query"))
    query_vectors, query_mask = out["token_embeddings"], out["attention_mask"].bool()
    if query_vectors.shape[1] != 1 and bool((query_mask.sum(dim=1) > 1).any()):
        msg = (
            "Multi-view losses score a query by one vector (MVR Eq. 4), but this model gives queries "
            f"{query_vectors.shape[1]} vectors: use a model whose query task pools to one vector."
        )
        raise ValueError(msg)
    query = query_vectors[:, 0]
    batch_size = query.shape[0]

    # the documents' tokens, read before the forward (which may replace a feature's attention_mask by its views')
    tokens = [token_rows(f) for f in features[1:]] if gather_across_devices else []
    embeddings, masks = embed_columns_padded(model, features[1:], mini_batch_size, task_default="document")
    if gather_across_devices:
        gathered = [all_gather_padded(e, m, with_grad=True) for e, m in zip(embeddings, masks, strict=True)]
        embeddings, masks = [e for e, _ in gathered], [m.bool() for _, m in gathered]
    stacked, stacked_mask = stack_padded_token_embeddings(embeddings, masks)  # (B', C, K, d), (B', C, K)
    columns, views = stacked.shape[1], stacked.shape[2]
    doc_views = stacked.transpose(0, 1).reshape(columns * stacked.shape[0], views, stacked.shape[3])
    view_mask = stacked_mask.transpose(0, 1).reshape(columns * stacked.shape[0], views).bool()
    offset = get_rank() * batch_size if gather_across_devices else 0
    positive_index = torch.arange(batch_size, device=query.device) + offset
    exclude = copies_of_positives(tokens, positive_index) if gather_across_devices else None
    return query, doc_views, view_mask, positive_index, exclude


def token_rows(features: dict[str, Any]) -> Tensor | None:
    """
    A column's tokens, one row a text: ``input_ids + 1`` with 0 for padding (``None`` without ``input_ids``). A text
    read in several windows (snippet mode's ``mvr_windows``) is told by its first window.
    """
    if "input_ids" not in features:
        return None
    ids = features["input_ids"].long()
    mask = features.get("attention_mask")
    rows = ids + 1 if mask is None else (ids + 1) * mask.bool()
    windows = features.get("mvr_windows")
    if windows is not None:
        rows = rows[windows[:, 0].bool()]
    return rows


def copies_of_positives(tokens: list[Tensor | None], positive_index: Tensor) -> Tensor | None:
    """
    ``(B, C * B')`` bool: the gathered documents whose tokens (:func:`token_rows` of each document column, gathered
    here) are those of a query's own positive, the positive itself left out; ``None`` without tokens.

    The no-duplicates batch sampler keeps a text out of two rows of one process's batch only. Under DDP another
    process's batch may hold the same passage (squad-mv has several questions per paragraph, and one question's hard
    negative can be another's positive): gathered, it would be a negative of the query it answers.
    """
    if not tokens or any(t is None for t in tokens):
        return None
    columns = [all_gather_padded(t[..., None], t > 0)[0][..., 0] for t in tokens]
    width = max(c.shape[1] for c in columns)
    rows = torch.cat([nn.functional.pad(c, (0, width - c.shape[1])) for c in columns])  # column by column
    _, text = torch.unique(rows, dim=0, return_inverse=True)  # equal token rows, equal numbers
    text = text.to(positive_index.device)
    exclude = text[None] == text[positive_index][:, None]
    exclude[torch.arange(len(positive_index), device=exclude.device), positive_index] = False
    return exclude


class ViewStats:
    """
    Which view of each positive wins (``argmax_i f_i(q, d+)``) and how often it is the answer view, since the last
    :meth:`pop`: the collapse diagnostic of MVR (one view winning everything) that no library loss reports.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.wins = torch.zeros(0, dtype=torch.float64)
        self.answer = torch.zeros(2, dtype=torch.float64)  # answer view known, winning view == answer view

    def add(self, winning_view: Tensor, num_views: int, answer_view: Tensor | None = None) -> None:
        winning = winning_view.detach().cpu()
        counts = torch.bincount(winning, minlength=num_views).double()
        if counts.numel() > self.wins.numel():
            self.wins = torch.cat([self.wins, torch.zeros(counts.numel() - self.wins.numel(), dtype=torch.float64)])
        self.wins[: counts.numel()] += counts
        if answer_view is not None:
            answer = answer_view.detach().cpu()
            known = answer >= 0
            self.answer += torch.tensor([known.sum().item(), (winning[known] == answer[known]).sum().item()]).double()

    def pop(self) -> dict[str, Any]:
        """``{"view_wins": [...], "answer_view_agreement": ...}`` summed over processes under DDP, then reset."""
        width = self.wins.numel()
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            device = "cuda" if torch.distributed.get_backend() == "nccl" else "cpu"
            width_t = torch.tensor([width], device=device)
            torch.distributed.all_reduce(width_t, op=torch.distributed.ReduceOp.MAX)
            width = int(width_t.item())
            totals = torch.cat([self.wins, torch.zeros(width - self.wins.numel(), dtype=torch.float64), self.answer])
            totals = totals.to(device)
            torch.distributed.all_reduce(totals)
            wins, answer = totals[:width].cpu(), totals[width:].cpu()
        else:
            wins, answer = self.wins, self.answer
        record: dict[str, Any] = {"view_wins": [int(w) for w in wins.tolist()]} if width else {}
        if answer[0] > 0:
            record["answer_view_agreement"] = round(float(answer[1] / answer[0]), 4)
        self.reset()
        return record


class MultiViewLoss(nn.Module):
    """
    What the multi-view sentence-transformers losses share: the model, ``lambda_local``, the annealed ``temperature``
    attribute, the batch options and the view statistics.
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        lambda_local: float,
        temperature: float,
        mini_batch_size: int | None,
        gather_across_devices: bool,
    ) -> None:
        super().__init__()
        if lambda_local < 0:
            msg = f"lambda_local must be non-negative, got {lambda_local}."
            raise ValueError(msg)
        if not temperature > 0:
            msg = f"temperature must be positive, got {temperature}."
            raise ValueError(msg)
        self.model = model
        self.lambda_local = lambda_local
        self.temperature = temperature
        self.mini_batch_size = mini_batch_size
        self.gather_across_devices = gather_across_devices
        self.view_stats = ViewStats()

    def embed(
        self, sentence_features: Iterable[dict[str, Any]]
    ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor | None]:
        """The batch's query vectors, document views, view mask, each query's positive and the documents to leave
        out of its denominator (``embed_views``)."""
        return embed_views(
            self.model,
            sentence_features,
            mini_batch_size=self.mini_batch_size,
            gather_across_devices=self.gather_across_devices,
        )

    @staticmethod
    def answer_views(labels: Tensor, view_mask: Tensor, positive_index: Tensor) -> Tensor:
        """``(B,)`` long: each positive's answer view from the ``answer_view`` labels, ``-1`` where it is unknown,
        beyond the model's views, or a padding view in this batch (its snippet truncated away)."""
        answer_view = labels.to(device=view_mask.device, dtype=torch.long).reshape(-1)
        in_range = answer_view < view_mask.shape[1]
        clamped = answer_view.clamp(min=0, max=view_mask.shape[1] - 1)
        real = view_mask[positive_index].gather(1, clamped[:, None])[:, 0] & in_range
        return torch.where(real, answer_view, torch.full_like(answer_view, -1))

    def get_config_dict(self) -> dict[str, Any]:
        return {
            "lambda_local": self.lambda_local,
            "temperature": self.temperature,
            "mini_batch_size": self.mini_batch_size,
            "gather_across_devices": self.gather_across_devices,
        }
