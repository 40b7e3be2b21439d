"""The pgvector store behind ``MultiViewRetriever`` in a Haystack pipeline, dumped to YAML and loaded back: only the
store changes (the connection string stays the name of its environment variable)."""

from __future__ import annotations

import pytest

from .conftest import require_server

require_server()

import dataclasses  # noqa: E402

import numpy as np  # noqa: E402
from haystack import Document, Pipeline  # noqa: E402

from haystack_mvr.components.retrievers import MultiViewRetriever  # noqa: E402
from haystack_mvr.document_stores.pgvector import PgvectorMultiViewDocumentStore  # noqa: E402
from haystack_mvr.views import ENCODER_KEY, MATCHED_TEXT_KEY, PackedViews, attach_views  # noqa: E402

from .conftest import drop_tables, new_table_name  # noqa: E402

ENCODER = {"model": "enc-pipeline", "mode": "snippet"}


@pytest.fixture
def env_store(pg_uri, monkeypatch):
    """A store whose connection string is the environment variable PG_CONN_STR (serializable)."""
    monkeypatch.setenv("PG_CONN_STR", pg_uri)
    store = PgvectorMultiViewDocumentStore(table_name=new_table_name())
    yield store
    store.close()
    drop_tables(pg_uri, store.table_name)


def test_retriever_pipeline_round_trips_through_yaml(env_store, pg_uri):
    store = env_store
    content = "Warsaw lies on the Vistula. Krakow lies on the Vistula too."
    views = np.eye(3, 8, dtype=np.float32)
    doc = attach_views(Document(id="w", content=content, meta={"city": "Warsaw"}), views, [None, (0, 27), (28, 59)])
    other = attach_views(Document(id="k", content="Elsewhere.", meta={"city": "Krakow"}), np.ones((1, 8)) / 8)
    store.write_documents([dataclasses.replace(d, meta={**d.meta, ENCODER_KEY: ENCODER}) for d in (doc, other)])
    pipeline = Pipeline()
    pipeline.add_component("retriever", MultiViewRetriever(document_store=store, top_k=2))
    loaded = Pipeline.loads(pipeline.dumps())
    assert "PG_CONN_STR" in pipeline.dumps() and pg_uri not in pipeline.dumps()
    loaded.warm_up()
    query = [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    result = loaded.run({"retriever": {"query_embedding": query, "encoder": ENCODER}})["retriever"]["documents"]
    assert [d.id for d in result] == ["w", "k"]
    assert result[0].meta[MATCHED_TEXT_KEY] == "Krakow lies on the Vistula too."
    packed = PackedViews(np.asarray([query], np.float32))
    filters = {"field": "meta.city", "operator": "==", "value": "Krakow"}
    run = {"retriever": {"packed_query_embedding": packed, "filters": filters}}
    assert [d.id for d in loaded.run(run)["retriever"]["documents"]] == ["k"]
    with pytest.raises(Exception, match="encoder"):
        loaded.run({"retriever": {"query_embedding": query, "encoder": {"model": "enc-pipeline", "mode": "mvr"}}})
