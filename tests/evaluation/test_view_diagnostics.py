import math

import numpy as np
import pytest

from haystack_mvr.evaluation import (
    answer_view_accuracy,
    local_variation,
    per_view_accuracy,
    view_perplexity,
    view_perplexity_per_doc,
    viewer_attention_kl,
)

# --- Local variation (MVR Eq. 9) ---


def test_local_variation_hand_value():
    assert local_variation([[0.9, 0.1, 0.2]]) == pytest.approx(0.9 - 0.15)


def test_local_variation_is_zero_for_collapsed_views_and_averages_pairs():
    assert local_variation([[0.4, 0.4, 0.4]]) == pytest.approx(0.0)
    assert local_variation([[0.9, 0.1, 0.2], [0.5, 0.5, 0.5]]) == pytest.approx(0.75 / 2)


def test_local_variation_padded_views_never_count():
    scores = np.array([[0.9, 0.1, 0.2, 5.0], [0.3, -7.0, 0.0, 0.0]])
    mask = np.array([[True, True, True, False], [True, False, False, False]])
    per_pair = local_variation(scores, mask, reduce=False)
    assert per_pair[0] == pytest.approx(0.75)
    assert math.isnan(per_pair[1])  # one real view: no LV
    assert local_variation(scores, mask) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="two or more real views"):
        local_variation(scores[1:], mask[1:])


# --- Perplexity (MVR Eq. 10) ---


def test_perplexity_uniform_is_k_and_collapsed_is_one():
    assert view_perplexity([0, 1, 2, 3], ["d"] * 4) == pytest.approx(4.0)
    assert view_perplexity([2, 2, 2, 2], ["d"] * 4) == pytest.approx(1.0)


def test_perplexity_per_document_then_mean():
    views = [0, 0, 1, 2, 3, 3, 3, 3, 1]
    docs = ["a", "a", "a", "a", "b", "b", "b", "b", "c"]
    per_doc = view_perplexity_per_doc(views, docs)
    assert per_doc["a"] == pytest.approx(2**1.5)  # p = (1/2, 1/4, 1/4): exp(1.5 ln 2)
    assert per_doc["b"] == pytest.approx(1.0)
    assert per_doc["c"] == pytest.approx(1.0)
    assert view_perplexity(views, docs) == pytest.approx((2**1.5 + 2) / 3)
    assert view_perplexity(views, docs, min_queries=2) == pytest.approx((2**1.5 + 1) / 2)
    with pytest.raises(ValueError, match="min_queries"):
        view_perplexity(views, docs, min_queries=5)


def test_perplexity_rejects_misaligned_input():
    with pytest.raises(ValueError, match="one gold id per query"):
        view_perplexity([0, 1], ["a"])
    with pytest.raises(ValueError, match="view indices"):
        view_perplexity([0.5, 1.0], ["a", "a"])


# --- Per-view accuracy (CAMVR Table 2) ---

QUERIES = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
VIEWS = np.array(
    [
        [[1.0, 0.0], [0.0, 1.0]],  # gold of both queries: view 1 answers q0, view 2 answers q1
        [[0.5, 0.5], [0.5, 0.5]],
        [[0.0, 0.8], [0.8, 0.0]],
    ],
    dtype=np.float32,
)
GOLD = np.array([0, 0])


def test_per_view_accuracy_hand_values():
    acc = per_view_accuracy(QUERIES, VIEWS, GOLD, ks=(1, 2, 3))
    # view 1 alone: q0 ranks its gold 1st, q1 3rd (0 < 0.5 < 0.8); view 2 alone: the reverse.
    for view in (1, 2):
        assert acc[f"view{view}_R@1"] == 0.5
        assert acc[f"view{view}_R@2"] == 0.5
        assert acc[f"view{view}_R@3"] == 1.0
    assert acc["overall_R@1"] == 1.0
    assert per_view_accuracy(QUERIES, VIEWS, GOLD, ks=(1, 2, 3), batch_size=1) == acc


def test_per_view_accuracy_padded_view_cannot_retrieve():
    mask = np.array([[True, False], [True, True], [True, True]])
    acc = per_view_accuracy(QUERIES, VIEWS, GOLD, mask, ks=(1, 3))
    assert acc["view2_R@3"] == 0.0  # the gold's view 2 is padding: a miss at every cutoff
    assert acc["overall_R@1"] == 0.5  # q1 now sees 0 on the gold vs 0.5 and 0.8


def test_per_view_accuracy_ties_count_against_gold():
    views = np.concatenate([VIEWS, VIEWS[:1]])  # a duplicate of the gold document
    acc = per_view_accuracy(QUERIES, views, GOLD, ks=(1, 2))
    assert acc["overall_R@1"] == 0.0
    assert acc["overall_R@2"] == 1.0


def test_per_view_accuracy_rejects_bad_shapes():
    with pytest.raises(ValueError, match=r"\(N, k, d\)"):
        per_view_accuracy(QUERIES, VIEWS[:, :, :1], GOLD)
    with pytest.raises(ValueError, match="row index"):
        per_view_accuracy(QUERIES, VIEWS, np.array([0, 3]))


# --- Answer-view accuracy (CAMVR Eq. 15) ---


def test_answer_view_accuracy():
    snippets = [["Denver won.", "Broncos won."], ["", "nothing"], ["Panthers lost.", "x"]]
    answers = [["Broncos"], ["Broncos"], ["Panthers"]]
    assert answer_view_accuracy(snippets, answers, ks=(1, 2)) == {
        "answer_view_R@1": pytest.approx(1 / 3),
        "answer_view_R@2": pytest.approx(2 / 3),
    }
    with pytest.raises(ValueError, match="one of each per query"):
        answer_view_accuracy(snippets, answers[:2])


# --- Viewer attention KL (CAMVR Eq. 14) ---


def test_kl_is_zero_for_identical_attention():
    attn = np.full((3, 4, 5), 0.2)
    np.testing.assert_allclose(viewer_attention_kl(attn), np.zeros((4, 4)), atol=1e-12)


def test_kl_hand_value_and_direction():
    attn = np.array([[[0.5, 0.5], [0.9, 0.1]]])
    kl = viewer_attention_kl(attn, eps=0.0)
    # D(i, j) = sum_l a_jl log(a_jl / a_il)
    assert kl[0, 1] == pytest.approx(0.9 * math.log(0.9 / 0.5) + 0.1 * math.log(0.1 / 0.5))
    assert kl[1, 0] == pytest.approx(0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1))
    assert kl[0, 0] == kl[1, 1] == 0.0


def test_kl_padding_tokens_and_views_are_ignored():
    doc = np.array([[0.5, 0.5, 0.0], [0.9, 0.1, 0.0]])
    padded = doc.copy()
    padded[:, 2] = [0.3, 0.7]  # junk on a padding token
    attn = np.stack([doc, padded])
    tokens = np.array([[True, True, False], [True, True, False]])
    expected = viewer_attention_kl(doc[None, :, :2])
    np.testing.assert_allclose(viewer_attention_kl(attn, tokens), expected)
    same = np.stack([doc, np.full((2, 3), 1 / 3)])  # second document: identical viewers, KL 0
    np.testing.assert_allclose(viewer_attention_kl(same)[0, 1], viewer_attention_kl(doc[None])[0, 1] / 2)
    views = np.array([[True, True], [True, False]])
    np.testing.assert_allclose(viewer_attention_kl(same, view_mask=views), viewer_attention_kl(doc[None]))


def test_kl_eps_smoothing_keeps_zero_attention_finite():
    attn = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    kl = viewer_attention_kl(attn)
    assert np.all(np.isfinite(kl)) and kl[0, 1] > 10
    with pytest.raises(ValueError, match="eps > 0"):
        viewer_attention_kl(attn, eps=0.0)
