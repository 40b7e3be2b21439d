"""Retrieval metrics (DPR answer matching, ranx gold metrics), answer EM / F1, multi-view diagnostics, reports."""

from haystack_mvr.evaluation.answer_matching import has_answer, normalized_tokens
from haystack_mvr.evaluation.answer_metrics import (
    PairedDifference,
    answer_f1,
    exact_match,
    normalize_answer,
    paired_difference,
    question_scores,
    summarize_answers,
)
from haystack_mvr.evaluation.report import format_value, is_percent_metric, markdown_table
from haystack_mvr.evaluation.retrieval_metrics import (
    answer_top_k_accuracy,
    compute_retrieval_metrics,
    first_answer_ranks,
)
from haystack_mvr.evaluation.view_diagnostics import (
    answer_view_accuracy,
    local_variation,
    per_view_accuracy,
    view_perplexity,
    view_perplexity_per_doc,
    viewer_attention_kl,
)

__all__ = [
    "PairedDifference",
    "answer_f1",
    "answer_top_k_accuracy",
    "answer_view_accuracy",
    "compute_retrieval_metrics",
    "exact_match",
    "first_answer_ranks",
    "format_value",
    "has_answer",
    "is_percent_metric",
    "local_variation",
    "markdown_table",
    "normalize_answer",
    "normalized_tokens",
    "paired_difference",
    "per_view_accuracy",
    "question_scores",
    "summarize_answers",
    "view_perplexity",
    "view_perplexity_per_doc",
    "viewer_attention_kl",
]
