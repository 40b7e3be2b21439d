"""Snippet mode honours a sentence-transformers model's own pooling: query vector and global view equal ``encode``."""

import json

import numpy as np
import pytest
from haystack import Document

from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder
from haystack_mvr.modeling.loading import pooling_mode, sentence_transformers_defaults
from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter
from haystack_mvr.views import document_views

TEXTS = ["Warsaw is the capital of Poland. It lies on the Vistula.", "Short one."]
QUERIES = ["which river flows through warsaw?", "capital"]


def build_sentence_transformer(backbone, directory, pooling: str, normalize: bool):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    transformer = Transformer(str(backbone), max_seq_length=64)
    modules = [transformer, Pooling(transformer.get_embedding_dimension(), pooling_mode=pooling)]
    if normalize:
        modules.append(Normalize())
    model = SentenceTransformer(modules=modules, device="cpu")
    model.save(str(directory))
    return model


def cosines(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


@pytest.mark.parametrize(
    ("pooling", "normalize"), [("cls", False), ("mean", True), ("lasttoken", False), ("weightedmean", True)]
)
def test_query_and_global_view_equal_sentence_transformers_encode(tiny_backbone, tmp_path, pooling, normalize):
    model = build_sentence_transformer(tiny_backbone, tmp_path / "st", pooling, normalize)
    encoder = MultiVectorEncoderAdapter.snippet(
        tmp_path / "st", device="cpu", num_views=3, snippet_encoding="late_chunking"
    )
    assert encoder.config.pooling == pooling and encoder.config.normalize is normalize
    assert encoder.config.doc_max_length == 64 == encoder.config.query_max_length

    expected_docs = model.encode(TEXTS, convert_to_numpy=True)
    expected_queries = model.encode(QUERIES, convert_to_numpy=True)
    global_views = np.stack([d.views[0] for d in encoder.encode_documents(TEXTS)])
    queries = encoder.encode_queries(QUERIES)
    assert cosines(global_views, expected_docs).min() > 0.99999
    assert cosines(queries, expected_queries).min() > 0.99999
    np.testing.assert_allclose(queries, expected_queries, atol=1e-5)  # norms too, with or without Normalize


def test_embedders_use_the_model_pooling(tiny_backbone, tmp_path):
    model = build_sentence_transformer(tiny_backbone, tmp_path / "cls", "cls", normalize=False)
    doc = MultiViewDocumentEmbedder(model=tmp_path / "cls", progress_bar=False).run([Document(content=TEXTS[0])])
    global_view = document_views(doc["documents"][0])[0]
    query = MultiViewTextEmbedder(model=tmp_path / "cls").run(QUERIES[0])["embedding"]
    assert cosines(global_view, model.encode(TEXTS[0])) > 0.99999
    assert cosines(query, model.encode(QUERIES[0])) > 0.99999


def test_mean_pooling_differs_from_cls_so_the_test_can_fail(tiny_backbone, tmp_path):
    model = build_sentence_transformer(tiny_backbone, tmp_path / "cls", "cls", normalize=False)
    mean = MultiVectorEncoderAdapter.snippet(
        tmp_path / "cls", device="cpu", pooling="mean", snippet_encoding="late_chunking"
    )
    assert cosines(mean.encode_queries(QUERIES), model.encode(QUERIES)).min() < 0.99


def test_legacy_and_unsupported_pooling_configs(tmp_path):
    assert pooling_mode({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}) == "cls"
    assert pooling_mode({"pooling_mode": ["mean"]}) == "mean"
    with pytest.raises(ValueError, match="max"):
        pooling_mode({"pooling_mode": "max"})
    with pytest.raises(ValueError, match="not supported"):
        pooling_mode({"pooling_mode": ["cls", "mean"]})
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode": "mean"}))
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
    ]
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ValueError, match="Dense"):
        sentence_transformers_defaults(str(tmp_path))
    assert sentence_transformers_defaults(str(tmp_path / "1_Pooling")) == {}  # not a sentence-transformers folder


def test_viewer_modes_take_no_pooling():
    from haystack_mvr.modeling import MultiViewConfig

    with pytest.raises(ValueError, match="snippet"):
        MultiViewConfig(mode="mvr", pooling="cls")
    with pytest.raises(ValueError, match="pooling"):
        MultiViewConfig(mode="snippet", pooling="max")
