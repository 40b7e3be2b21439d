"""The snippet mode as sentence-transformers 6 modules: a saved snippet checkpoint is a MultiVectorEncoder folder."""

import numpy as np
import pytest
from haystack import Document

from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder
from haystack_mvr.views import VIEWS_KEY

st = pytest.importorskip("sentence_transformers", minversion="6")

TEXTS = [
    "Warsaw is the capital of Poland. It lies on the Vistula. Its old town was rebuilt after the war.",
    "Short one.",
    "First point. Second point. Third point. Fourth point. Fifth point.",
]
QUERY = "Which river flows through Warsaw?"


@pytest.fixture(scope="module")
def snippet_checkpoint(tiny_backbone, tmp_path_factory):
    from haystack_mvr.modeling.st_modules import snippet_encoder

    path = tmp_path_factory.mktemp("snippet-st")
    snippet_encoder(tiny_backbone, num_snippets=3).save(str(path))
    return path


def test_multi_vector_encoder_loads_it_and_matches_the_haystack_embedders(snippet_checkpoint, tiny_backbone):
    model = st.MultiVectorEncoder(str(snippet_checkpoint), device="cpu", trust_remote_code=True)
    assert [type(m).__name__ for m in model] == ["SnippetTransformer", "SnippetViews"]
    views = model.encode_document(TEXTS)
    query = model.encode_query([QUERY])[0]
    assert query.shape == (1, 32)

    embedded = MultiViewDocumentEmbedder(model=tiny_backbone, progress_bar=False, encoder_kwargs={"num_views": 3})
    docs = embedded.run([Document(content=t) for t in TEXTS])["documents"]
    for ours, theirs in zip(docs, views, strict=True):
        np.testing.assert_allclose(np.asarray(ours.meta[VIEWS_KEY]), theirs.numpy(), atol=1e-5)
    expected = MultiViewTextEmbedder(model=tiny_backbone, encoder_kwargs={"num_views": 3}).run(QUERY)["embedding"]
    np.testing.assert_allclose(query[0].numpy(), expected, atol=1e-5)
    # MaxSim of a one-vector query is the max over views (MVR Eq. 4)
    scores = model.similarity([query], views)[0].numpy()
    np.testing.assert_allclose(scores, [float((v.numpy() @ query[0].numpy()).max()) for v in views], rtol=1e-5)


def test_the_haystack_embedders_load_the_st_checkpoint(snippet_checkpoint, tiny_backbone):
    from_st = MultiViewDocumentEmbedder(model=snippet_checkpoint, progress_bar=False)
    from_backbone = MultiViewDocumentEmbedder(model=tiny_backbone, progress_bar=False, encoder_kwargs={"num_views": 3})
    docs = [Document(content=t) for t in TEXTS]
    for a, b in zip(from_st.run(docs)["documents"], from_backbone.run(docs)["documents"], strict=True):
        np.testing.assert_allclose(a.meta[VIEWS_KEY], b.meta[VIEWS_KEY], atol=1e-6)
    assert from_st.encoder.config.num_views == 3 and from_st.encoder.config.mode == "snippet"


def test_without_trust_remote_code_sentence_transformers_refuses_foreign_modules(snippet_checkpoint):
    with pytest.raises(ValueError, match="trust_remote_code"):
        st.MultiVectorEncoder(str(snippet_checkpoint), device="cpu")
