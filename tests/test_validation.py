"""One meaning of "a positive integer" in every layer: ``True`` refused everywhere, numpy integers accepted."""

import numpy as np
import pytest

from haystack_mvr.components.builders import MultiViewContextBuilder
from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.modeling.config import MultiViewConfig
from haystack_mvr.validation import check_positive_int


@pytest.mark.parametrize("value", [True, False, 0, -1, 1.0, "2", None])
def test_check_refuses_what_is_no_count(value):
    with pytest.raises(ValueError, match="n must be a positive integer, got"):
        check_positive_int("n", value)


def test_check_accepts_ints_numpy_ints_and_optional_none():
    assert check_positive_int("n", 3) == 3
    assert type(check_positive_int("n", np.int64(3))) is int
    assert check_positive_int("n", None, optional=True) is None
    with pytest.raises(ValueError, match="positive integer or None"):
        check_positive_int("n", True, optional=True)


@pytest.mark.parametrize(
    "build",
    [
        lambda: MultiViewDocumentEmbedder(model="m", batch_size=True),
        lambda: MultiViewTextEmbedder(model="m", batch_size=True),
        lambda: MultiViewContextBuilder(document_store=FaissMultiViewDocumentStore(), budget_tokens=True),
        lambda: FaissMultiViewDocumentStore(search_threads=True),
        lambda: MultiViewConfig(mode="mvr", num_views=True),
    ],
    ids=["document embedder", "text embedder", "context builder", "faiss store", "encoder config"],
)
def test_every_layer_refuses_true_alike(build):
    with pytest.raises(ValueError, match=r"must be an? (positive )?integer"):
        build()
