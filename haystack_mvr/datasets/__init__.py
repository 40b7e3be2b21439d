"""Readers for the data the project trains and evaluates on (standard library only)."""

from haystack_mvr.datasets.squad_mv import (
    DEV_ARTICLES,
    Passage,
    Question,
    default_data_dir,
    load_corpus,
    load_questions,
    split_by_article,
)

__all__ = [
    "DEV_ARTICLES",
    "Passage",
    "Question",
    "default_data_dir",
    "load_corpus",
    "load_questions",
    "split_by_article",
]
