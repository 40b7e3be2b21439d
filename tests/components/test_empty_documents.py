"""A document without text does not stop its batch: MultiViewDocumentEmbedder embeds it as Haystack's own document
embedders do (its ``content or ""``, with its embedded meta fields), and the documents beside it are embedded as if
alone."""

from __future__ import annotations

import numpy as np
import pytest
from haystack import Document, Pipeline
from haystack.components.writers import DocumentWriter

from haystack_mvr.components.embedders import MultiViewDocumentEmbedder
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.views import SPANS_KEY, document_views
from tests.conftest import save_tiny_checkpoint

GOOD = "The river flows north. Boats carry grain to the sea."
EMPTY = [Document(id="none", content=None), Document(id="blank", content=""), Document(id="space", content="  \n ")]


@pytest.fixture(scope="module")
def camvr_checkpoint(tiny_backbone, tmp_path_factory):
    return save_tiny_checkpoint(tiny_backbone, tmp_path_factory.mktemp("camvr"), "camvr", 3)


@pytest.mark.parametrize("kind", ["snippet", "camvr"])
def test_an_empty_document_does_not_stop_the_batch(tiny_backbone, camvr_checkpoint, kind):
    model = tiny_backbone if kind == "snippet" else camvr_checkpoint
    embedder = MultiViewDocumentEmbedder(model=model, progress_bar=False)
    good = Document(id="good", content=GOOD)
    out = embedder.run([EMPTY[0], good, *EMPTY[1:]])["documents"]
    assert [d.id for d in out] == ["none", "good", "blank", "space"]
    assert [d.content for d in out] == [None, GOOD, "", "  \n "]  # contents are kept as they were
    alone = embedder.run([good])["documents"][0]
    np.testing.assert_allclose(document_views(out[1]), document_views(alone), atol=1e-5)
    assert out[1].meta[SPANS_KEY] == alone.meta[SPANS_KEY]
    for doc in (out[0], out[2], out[3]):
        views = document_views(doc)
        assert views is not None and np.isfinite(views).all() and doc.embedding is not None
        assert SPANS_KEY not in doc.meta or all(s is None for s in doc.meta[SPANS_KEY])  # no snippet to point at


def test_the_embedded_meta_of_an_empty_document_is_what_it_embeds(tiny_backbone):
    embedder = MultiViewDocumentEmbedder(model=tiny_backbone, progress_bar=False, meta_fields_to_embed=["title"])
    titled = embedder.run([Document(id="t", content=None, meta={"title": "Warsaw"})])["documents"][0]
    plain = embedder.run([Document(id="p", content=None)])["documents"][0]
    assert not np.allclose(document_views(titled)[0], document_views(plain)[0])  # "Warsaw\n", not ""


def test_every_document_of_the_batch_is_indexed(tiny_backbone):
    store = FaissMultiViewDocumentStore(index_factory="Flat")
    indexing = Pipeline()
    indexing.add_component("embedder", MultiViewDocumentEmbedder(model=tiny_backbone, progress_bar=False))
    indexing.add_component("writer", DocumentWriter(document_store=store))
    indexing.connect("embedder.documents", "writer.documents")
    indexing.run({"embedder": {"documents": [Document(id="good", content=GOOD), *EMPTY]}})
    assert store.count_documents() == 4
    assert "good" in {d.id for d in store.search(np.ones(32, dtype=np.float32), top_k=4)}


def test_haystacks_own_document_embedder_follows_the_same_policy(tiny_backbone):
    """The reference: sentence-transformers-haystack embeds ``content or ""`` and raises for none of them."""
    from haystack_integrations.components.embedders.sentence_transformers import (
        SentenceTransformersDocumentEmbedder,
    )

    embedder = SentenceTransformersDocumentEmbedder(model=str(tiny_backbone), progress_bar=False)
    embedder.warm_up()
    out = embedder.run([Document(id="good", content=GOOD), *EMPTY])["documents"]
    assert [d.id for d in out] == ["good", "none", "blank", "space"]
    assert all(d.embedding is not None for d in out)
