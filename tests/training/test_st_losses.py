"""The multi-view losses as sentence-transformers losses: Eq. 6, 7, 13 by hand, the library's InfoNCE, annealing."""

import math

import pytest
import torch
from sentence_transformers.multi_vector_encoder import losses as st_losses
from sentence_transformers.multi_vector_encoder.scoring import colbert_scores
from torch import nn

from haystack_mvr.training import AnnealedTemperatureCallback
from haystack_mvr.training.losses import (
    MultiViewAnswerViewLoss,
    MultiViewGlobalLocalLoss,
    answer_view_loss,
    global_local_loss,
)

# The fixed tensors of test_losses.py: d0, d1 (second view padding), d2, two views each.
D0 = [[2.0, 0.0], [0.0, 1.0]]  # q0 scores 2, 0 | q1 scores 0, 1
D1 = [[1.0, 1.0], [9.0, 9.0]]  # q0 scores 1, (9) | q1 scores 1, (9): the 9s are padding
D2 = [[0.0, 3.0], [1.0, 0.0]]  # q0 scores 0, 1 | q1 scores 3, 0


class VectorsAsModel(nn.Module):
    """Stands in for a MultiVectorEncoder: a column's features are already its vectors and mask."""

    def forward(self, features, task=None):
        return {"token_embeddings": features["vectors"], "attention_mask": features["mask"]}


def column(rows, mask=None):
    vectors = torch.tensor(rows)
    return {"vectors": vectors, "mask": torch.ones(vectors.shape[:2], dtype=torch.bool) if mask is None else mask}


def batch():
    """Queries q0, q1 with positives d0, d2 and the hard negative d1 for both."""
    query = column([[[1.0, 0.0]], [[0.0, 1.0]]])
    positive = column([D0, D2])
    negative = column([D1, D1], torch.tensor([[True, False], [True, False]]))
    return [query, positive, negative]


def nll(pos, others, tau):
    return -math.log(math.exp(pos / tau) / (math.exp(pos / tau) + sum(math.exp(o / tau) for o in others)))


def local(best, views, tau):
    return -math.log(math.exp(best / tau) / sum(math.exp(v / tau) for v in views))


@pytest.mark.parametrize("tau", [1.0, 0.3])
def test_global_local_loss_is_eq6_plus_lambda_eq7(tau):
    # f(q0, .) = max views: d0 2 (positive), d2 1, d1 1, d1 1; f(q1, .): d2 3 (positive), d0 1, d1 1, d1 1
    expected_global = (nll(2, [1, 1, 1], tau) + nll(3, [1, 1, 1], tau)) / 2
    expected_local = (local(2, [2, 0], tau) + local(3, [3, 0], tau)) / 2
    loss = MultiViewGlobalLocalLoss(VectorsAsModel(), lambda_local=0.25, temperature=tau)
    parts = loss(batch())
    assert parts["global_loss"].item() == pytest.approx(expected_global, rel=1e-5, abs=1e-6)
    assert parts["local_loss"].item() == pytest.approx(0.25 * expected_local, rel=1e-5, abs=1e-6)


def test_answer_view_loss_is_eq13_with_the_answer_view_as_label():
    tau = 0.5
    # q0's answer is in view 1 of d0 (score 0), q1's in view 0 of d2 (score 3); the others by their best view
    expected = (nll(0, [1, 1, 1], tau) + nll(3, [1, 1, 1], tau)) / 2
    parts = MultiViewAnswerViewLoss(VectorsAsModel(), temperature=tau)(batch(), torch.tensor([1, 0]))
    assert parts["answer_view_loss"].item() == pytest.approx(expected, rel=1e-5)
    assert parts["local_loss"].item() == 0.0
    # unknown answer views (-1) fall back to the best view: MVR's Eq. 6
    unknown = MultiViewAnswerViewLoss(VectorsAsModel(), temperature=tau)(batch(), torch.tensor([-1, -1]))
    mvr = MultiViewGlobalLocalLoss(VectorsAsModel(), lambda_local=0.0, temperature=tau)(batch())
    assert unknown["answer_view_loss"].item() == pytest.approx(mvr["global_loss"].item(), rel=1e-6)


def test_an_answer_view_masked_in_the_batch_counts_as_unknown():
    features = batch()
    features[1]["mask"] = torch.tensor([[True, False], [True, True]])  # q0's answer snippet was truncated away
    loss = MultiViewAnswerViewLoss(VectorsAsModel(), temperature=1.0)
    masked = loss(features, torch.tensor([1, 0]))["answer_view_loss"]
    unknown = loss(features, torch.tensor([-1, 0]))["answer_view_loss"]
    assert masked.item() == pytest.approx(unknown.item())
    with pytest.raises(ValueError, match="answer_view"):
        loss(batch())
    with pytest.raises(ValueError, match="below"):
        loss(batch(), torch.tensor([2, 0]))


def test_global_local_loss_counts_how_often_the_answer_view_wins():
    # q0's best view of d0 is view 0 (scores 2, 0), q1's of d2 is view 0 (scores 3, 0)
    loss = MultiViewGlobalLocalLoss(VectorsAsModel(), lambda_local=0.01)
    plain = loss(batch())["global_loss"]
    labelled = loss(batch(), torch.tensor([1, 0]))["global_loss"]
    assert labelled.item() == plain.item()  # the answer view is a diagnostic here, not part of the loss
    assert loss.view_stats.pop() == {"view_wins": [4, 0], "answer_view_agreement": 0.5}
    loss(batch(), torch.tensor([-1, 0]))  # unknown answer views are not counted
    assert loss.view_stats.pop()["answer_view_agreement"] == 1.0
    masked = batch()
    masked[1]["mask"] = torch.tensor([[True, True], [True, False]])  # q1's answer view 1 is padding here
    loss(masked, torch.tensor([1, 1]))
    assert loss.view_stats.pop()["answer_view_agreement"] == 0.0
    loss(batch(), torch.tensor([0.5, 1.0]))  # a score column is no answer view
    loss(batch(), torch.tensor([-1, -1]))
    assert loss.view_stats.pop() == {"view_wins": [4, 0]}


@pytest.mark.parametrize("with_local", [False, True])
def test_equal_to_the_equations_on_the_flattened_batch(with_local):
    torch.manual_seed(0)
    queries, docs = torch.randn(3, 1, 4), torch.randn(3, 3, 5, 4)  # 3 queries; positive + 2 negatives, 5 views
    masks = torch.rand(3, 3, 5) > 0.3
    masks[..., 0] = True
    features = [{"vectors": queries, "mask": torch.ones(3, 1, dtype=torch.bool)}] + [
        {"vectors": docs[:, c], "mask": masks[:, c]} for c in range(3)
    ]
    flat_views, flat_mask = docs.transpose(0, 1).reshape(9, 5, 4), masks.transpose(0, 1).reshape(9, 5)
    positive = torch.arange(3)
    lambda_local = 0.1 if with_local else 0.0
    ours = MultiViewGlobalLocalLoss(VectorsAsModel(), lambda_local=lambda_local, temperature=0.4)(features)
    global_loss, local_loss, _ = global_local_loss(queries[:, 0], flat_views, flat_mask, positive, 0.4)
    assert ours["global_loss"].item() == global_loss.item()  # the same floats, not just close ones
    assert ours["local_loss"].item() == (lambda_local * local_loss).item()
    answer = torch.tensor([0, -1, 0])
    camvr = MultiViewAnswerViewLoss(VectorsAsModel(), lambda_local=lambda_local, temperature=0.4)(features, answer)
    loss, local_loss, _ = answer_view_loss(queries[:, 0], flat_views, flat_mask, positive, answer, 0.4)
    assert camvr["answer_view_loss"].item() == loss.item()
    assert camvr["local_loss"].item() == (lambda_local * local_loss).item()


def test_without_the_local_term_it_is_the_librarys_multi_vector_infonce():
    """So sentence-transformers' GradCache loss (CachedMultiVector...) trains Eq. 6 with large batches."""
    torch.manual_seed(1)
    queries, docs = torch.randn(4, 1, 8), torch.randn(4, 2, 3, 8)
    masks = torch.ones(4, 2, 3, dtype=torch.bool)
    masks[1, 0, 2] = masks[2, 1, 1:] = False
    features = [{"vectors": queries, "mask": torch.ones(4, 1, dtype=torch.bool)}] + [
        {"vectors": docs[:, c], "mask": masks[:, c]} for c in range(2)
    ]
    tau = 0.3
    ours = MultiViewGlobalLocalLoss(VectorsAsModel(), lambda_local=0.0, temperature=tau)(features)["global_loss"]
    # MaxSim named explicitly: since sentence-transformers 6.3 the default is the model's own similarity
    library = st_losses.MultiVectorMultipleNegativesRankingLoss(
        VectorsAsModel(), scale=1 / tau, similarity_fct=colbert_scores
    )(features)
    assert ours.item() == pytest.approx(library.item(), rel=1e-5)


def test_padding_views_never_change_the_loss_nor_get_a_gradient():
    torch.manual_seed(2)
    docs = torch.randn(3, 2, 3, 4, requires_grad=True)
    masks = torch.tensor([[[1, 1, 0], [1, 0, 0]], [[1, 1, 1], [1, 1, 0]], [[1, 0, 0], [1, 1, 1]]], dtype=torch.bool)
    queries = torch.randn(3, 1, 4)

    def run(views):
        features = [{"vectors": queries, "mask": torch.ones(3, 1, dtype=torch.bool)}] + [
            {"vectors": views[:, c], "mask": masks[:, c]} for c in range(2)
        ]
        return sum(MultiViewGlobalLocalLoss(VectorsAsModel(), lambda_local=0.1, temperature=0.3)(features).values())

    base = run(docs)
    noisy = docs.detach().clone()
    noisy[~masks] = 1e4
    assert run(noisy).item() == pytest.approx(base.item(), rel=1e-6)
    base.backward()
    assert torch.all(docs.grad[~masks] == 0)


def test_queries_must_be_one_vector():
    features = batch()
    features[0] = column([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]])
    with pytest.raises(ValueError, match="one vector"):
        MultiViewGlobalLocalLoss(VectorsAsModel())(features)


def test_bad_options_are_rejected():
    with pytest.raises(ValueError, match="non-negative"):
        MultiViewGlobalLocalLoss(VectorsAsModel(), lambda_local=-1)
    with pytest.raises(ValueError, match="temperature"):
        MultiViewAnswerViewLoss(VectorsAsModel(), temperature=0)
    with pytest.raises(TypeError):
        MultiViewGlobalLocalLoss(VectorsAsModel(), 0.01)  # keyword-only


class _State:
    def __init__(self, epoch):
        self.epoch = epoch


def test_the_callback_anneals_tau_from_the_trainers_epoch():
    loss = MultiViewGlobalLocalLoss(VectorsAsModel())
    callback = AnnealedTemperatureCallback(loss)
    callback.on_step_begin(None, _State(0.9), None)
    assert loss.temperature == 1.0  # the whole first epoch at tau = 1 (per epoch, as in the paper)
    callback.on_step_begin(None, _State(2.5), None)  # e.g. resumed halfway through the third epoch
    assert loss.temperature == pytest.approx(math.exp(-0.2))
    callback.on_step_begin(None, _State(20.0), None)
    assert loss.temperature == 0.3
    logs = {"loss": 1.0}
    callback.on_log(None, _State(20.0), None, logs=logs)
    assert logs["temperature"] == 0.3
    # sentence-transformers' own losses are annealed through their scale = 1 / tau
    library = st_losses.CachedMultiVectorMultipleNegativesRankingLoss(VectorsAsModel(), mini_batch_size=2)
    AnnealedTemperatureCallback(library, per_epoch=False).on_step_begin(None, _State(1.5), None)
    assert library.scale == pytest.approx(math.exp(0.15))
    with pytest.raises(ValueError, match="temperature"):
        AnnealedTemperatureCallback(nn.Linear(1, 1))


def test_gathered_documents_put_each_query_at_its_own_positive(monkeypatch):
    """Rank 1 of 2 under DDP: its queries' positives sit after rank 0's, and the loss is the one-process loss."""
    import haystack_mvr.training.losses._multi_view_loss as common

    torch.manual_seed(3)
    queries, docs = torch.randn(4, 1, 4), torch.randn(4, 2, 3, 4)  # the global batch: rank 0 rows 0-1, rank 1 2-3
    masks = torch.ones(4, 2, 3, dtype=torch.bool)
    masks[0, 1, 2] = masks[3, 0, 1:] = False

    def features(rows):
        return [{"vectors": queries[rows], "mask": torch.ones(len(rows), 1, dtype=torch.bool)}] + [
            {"vectors": docs[rows, c], "mask": masks[rows, c]} for c in range(2)
        ]

    def gather(tensor, mask, with_grad=False):  # what all_gather_padded returns on rank 1: rank 0's rows first
        column = next(c for c in range(2) if torch.equal(tensor, docs[2:, c]))
        return docs[:, column], masks[:, column]

    monkeypatch.setattr(common, "all_gather_padded", gather)
    monkeypatch.setattr(common, "get_rank", lambda: 1)
    *_, positive_index, exclude = common.embed_views(VectorsAsModel(), features([2, 3]), gather_across_devices=True)
    assert positive_index.tolist() == [2, 3] and exclude is None  # no input_ids here: nothing to compare
    loss = MultiViewGlobalLocalLoss(VectorsAsModel(), lambda_local=0.1, temperature=0.5, gather_across_devices=True)
    rank_one = sum(loss(features([2, 3])).values())
    flat_views, flat_mask = docs.transpose(0, 1).reshape(8, 3, 4), masks.transpose(0, 1).reshape(8, 3)
    # the mean over rank 1's two queries of the one-process per-query losses
    per_query = []
    for b in (2, 3):
        global_loss, local_loss, _ = global_local_loss(queries[[b], 0], flat_views, flat_mask, torch.tensor([b]), 0.5)
        per_query.append(global_loss + 0.1 * local_loss)
    assert rank_one.item() == pytest.approx(sum(per_query).item() / 2, rel=1e-6)
