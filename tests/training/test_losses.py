"""MVR Eq. 5-7 and CAMVR Eq. 13 (the losses' equations on tensors) on small fixed tensors, masking invariances, and
the DPR special case."""

import math

import pytest
import torch
import torch.nn.functional as F

from haystack_mvr.training.losses import answer_view_loss, global_local_loss

# Two queries, three documents with two views each; document 1's second view is padding.
QUERY = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
VIEWS = torch.tensor(
    [
        [[2.0, 0.0], [0.0, 1.0]],  # q0 scores 2, 0 | q1 scores 0, 1
        [[1.0, 1.0], [9.0, 9.0]],  # q0 scores 1, (9) | q1 scores 1, (9): the 9s are padding
        [[0.0, 3.0], [1.0, 0.0]],  # q0 scores 0, 1 | q1 scores 3, 0
    ]
)
MASK = torch.tensor([[True, True], [True, False], [True, True]])
POSITIVE = torch.tensor([0, 2])


def nll(pos: float, others: list[float], tau: float) -> float:
    return -math.log(math.exp(pos / tau) / (math.exp(pos / tau) + sum(math.exp(o / tau) for o in others)))


def local(best: float, views: list[float], tau: float) -> float:
    return -math.log(math.exp(best / tau) / sum(math.exp(v / tau) for v in views))


@pytest.mark.parametrize("tau", [1.0, 0.5])
def test_global_loss_is_eq6_over_max_view_scores(tau):
    # f(q0, .) = max views = 2, 1, 1 (positive d0); f(q1, .) = 1, 1, 3 (positive d2)
    expected = (nll(2, [1, 1], tau) + nll(3, [1, 1], tau)) / 2
    global_loss, _, _ = global_local_loss(QUERY, VIEWS, MASK, POSITIVE, tau)
    assert global_loss.item() == pytest.approx(expected, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("tau", [1.0, 0.3])
def test_local_loss_is_eq7_over_the_positive_views(tau):
    expected_local = (local(2, [2, 0], tau) + local(3, [3, 0], tau)) / 2
    expected_global = (nll(2, [1, 1], tau) + nll(3, [1, 1], tau)) / 2
    global_loss, local_loss, winning_view = global_local_loss(QUERY, VIEWS, MASK, POSITIVE, temperature=tau)
    assert local_loss.item() == pytest.approx(expected_local, rel=1e-5, abs=1e-6)
    assert global_loss.item() == pytest.approx(expected_global, rel=1e-5, abs=1e-6)
    assert winning_view.tolist() == [0, 0]


def test_answer_view_loss_is_eq13():
    tau = 0.5
    # q0's answer is in view 1 of d0 (score 0); negatives by max view (1, 1). q1's answer view 0 of d2 (score 3).
    expected = (nll(0, [1, 1], tau) + nll(3, [1, 1], tau)) / 2
    loss, _, winning_view = answer_view_loss(QUERY, VIEWS, MASK, POSITIVE, torch.tensor([1, 0]), tau)
    assert loss.item() == pytest.approx(expected, rel=1e-5, abs=1e-6)
    assert winning_view.tolist() == [0, 0]  # the best view is still reported


def test_answer_view_optional_local_term():
    tau = 1.0
    _, local_loss, _ = answer_view_loss(QUERY, VIEWS, MASK, POSITIVE, torch.tensor([1, 0]), tau)
    expected_local = (local(0, [2, 0], tau) + local(3, [3, 0], tau)) / 2
    assert local_loss.item() == pytest.approx(expected_local, rel=1e-5, abs=1e-6)


def test_unknown_answer_view_falls_back_to_the_best_view():
    unknown = torch.tensor([-1, -1])
    camvr, _, _ = answer_view_loss(QUERY, VIEWS, MASK, POSITIVE, unknown, temperature=0.7)
    mvr, _, _ = global_local_loss(QUERY, VIEWS, MASK, POSITIVE, temperature=0.7)
    assert camvr.item() == pytest.approx(mvr.item(), rel=1e-5, abs=1e-6)


def test_answer_view_must_be_a_real_view():
    with pytest.raises(ValueError, match="real"):
        answer_view_loss(QUERY, VIEWS, MASK, torch.tensor([1, 2]), torch.tensor([1, 0]))  # d1's view 1 is padding
    with pytest.raises(ValueError, match="real"):
        answer_view_loss(QUERY, VIEWS, MASK, POSITIVE, torch.tensor([2, 0]))


@pytest.mark.parametrize("equation", [global_local_loss, answer_view_loss])
def test_padding_views_never_change_the_loss(equation):
    def loss(*args, **kwargs):  # the whole loss, L_local weighted by 0.1
        contrastive, local_loss, _ = equation(*args, **kwargs)
        return contrastive + 0.1 * local_loss

    torch.manual_seed(0)
    query, views = torch.randn(4, 8), torch.randn(6, 3, 8)
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 1]], dtype=torch.bool)
    positive = torch.tensor([0, 1, 2, 3])
    extra = (torch.tensor([2, 0, 1, 1]),) if equation is answer_view_loss else ()
    base = loss(query, views, mask, positive, *extra, temperature=0.3)
    # Overwrite padding views with huge values, and append a whole padding view column.
    noisy = views.clone()
    noisy[~mask] = 1e4
    wider = torch.cat([noisy, torch.full((6, 1, 8), 1e4)], dim=1)
    wider_mask = torch.cat([mask, torch.zeros(6, 1, dtype=torch.bool)], dim=1)
    noisy_loss = loss(query, noisy, mask, positive, *extra, temperature=0.3)
    assert noisy_loss.item() == pytest.approx(base.item(), rel=1e-5, abs=1e-6)
    assert loss(query, wider, wider_mask, positive, *extra, temperature=0.3).item() == pytest.approx(
        base.item(), rel=1e-6
    )
    # and padding views receive no gradient
    views = views.clone().requires_grad_(True)
    loss(query, views, mask, positive, *extra, temperature=0.3).backward()
    assert torch.all(views.grad[~mask] == 0)


@pytest.mark.parametrize("k", [1, 4])
def test_one_view_or_no_local_term_is_the_dpr_loss(k):
    torch.manual_seed(1)
    query, docs = torch.randn(5, 16), torch.randn(9, 16)  # 5 positives + 4 hard negatives
    positive = torch.tensor([0, 1, 2, 3, 4])
    views = docs[:, None, :].repeat(1, k, 1)  # k identical views: the max is the single vector's score
    mask = torch.ones(9, k, dtype=torch.bool)
    dpr = F.cross_entropy(query @ docs.T, positive)
    global_loss, local_loss, _ = global_local_loss(query, views, mask, positive, 1.0)
    assert global_loss.item() == pytest.approx(dpr.item(), rel=1e-5)
    if k == 1:
        assert local_loss.item() == 0.0  # so any lambda_local gives the DPR loss


def test_excluded_documents_leave_the_denominator():
    exclude = torch.tensor([[False, True, False], [False, False, False]])
    with_exclusion, _, _ = global_local_loss(QUERY, VIEWS, MASK, POSITIVE, temperature=1.0, exclude=exclude)
    expected = (nll(2, [1], 1.0) + nll(3, [1, 1], 1.0)) / 2
    assert with_exclusion.item() == pytest.approx(expected, rel=1e-5, abs=1e-6)


def test_bad_shapes_and_options_are_rejected():
    with pytest.raises(ValueError, match="view_mask"):
        global_local_loss(QUERY, VIEWS, MASK[:, :1], POSITIVE)
    with pytest.raises(ValueError, match="temperature"):
        global_local_loss(QUERY, VIEWS, MASK, POSITIVE, temperature=0.0)
    with pytest.raises(ValueError, match="answer_view must be"):
        answer_view_loss(QUERY, VIEWS, MASK, POSITIVE, torch.tensor([0]))
