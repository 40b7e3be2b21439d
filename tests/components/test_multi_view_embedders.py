import numpy as np
import pytest
import torch
from haystack import Document
from haystack.utils import ComponentDevice

from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder
from haystack_mvr.modeling import MultiViewEncoder
from haystack_mvr.views import SPANS_KEY, VIEWS_KEY


@pytest.fixture(scope="module")
def camvr_checkpoint(tiny_backbone, tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("camvr")
    MultiViewEncoder.from_pretrained(tiny_backbone, mode="camvr", num_views=3, doc_max_length=64).save_pretrained(path)
    return path


def test_document_embedder_init_defaults():
    embedder = MultiViewDocumentEmbedder()
    assert embedder.model == "sentence-transformers/all-MiniLM-L6-v2"
    assert embedder.batch_size == 32 and embedder.progress_bar is True
    assert embedder.meta_fields_to_embed == [] and embedder.embedding_separator == "\n"
    assert embedder.encoder is None  # nothing loaded in __init__


def test_document_embedder_to_dict_and_back():
    embedder = MultiViewDocumentEmbedder(
        model="some/model",
        device=ComponentDevice.from_str("cpu"),
        batch_size=4,
        progress_bar=False,
        meta_fields_to_embed=["title"],
        embedding_separator=" | ",
        prefix="passage: ",
        encoder_kwargs={"num_views": 6},
    )
    data = embedder.to_dict()
    assert data == {
        "type": "haystack_mvr.components.embedders.multi_view_document_embedder.MultiViewDocumentEmbedder",
        "init_parameters": {
            "model": "some/model",
            "device": {"type": "single", "device": "cpu"},
            "batch_size": 4,
            "progress_bar": False,
            "meta_fields_to_embed": ["title"],
            "embedding_separator": " | ",
            "prefix": "passage: ",
            "suffix": "",
            "encoder_kwargs": {"num_views": 6},
        },
    }
    again = MultiViewDocumentEmbedder.from_dict(data)
    assert again.to_dict() == data and again.device == ComponentDevice.from_str("cpu")


def test_text_embedder_to_dict_and_back():
    embedder = MultiViewTextEmbedder(model="m", device=ComponentDevice.from_str("cpu"), prefix="query: ")
    data = embedder.to_dict()
    assert data == {
        "type": "haystack_mvr.components.embedders.multi_view_text_embedder.MultiViewTextEmbedder",
        "init_parameters": {
            "model": "m",
            "device": {"type": "single", "device": "cpu"},
            "batch_size": 32,
            "progress_bar": False,
            "prefix": "query: ",
            "suffix": "",
            "encoder_kwargs": {},
        },
    }
    assert MultiViewTextEmbedder.from_dict(data).to_dict() == data


def test_invalid_batch_size():
    with pytest.raises(ValueError, match="batch_size"):
        MultiViewDocumentEmbedder(batch_size=0)
    with pytest.raises(ValueError, match="batch_size"):
        MultiViewTextEmbedder(batch_size=-1)


def test_warm_up_is_idempotent_and_shared(camvr_checkpoint):
    doc_embedder = MultiViewDocumentEmbedder(model=camvr_checkpoint, device=ComponentDevice.from_str("cpu"))
    text_embedder = MultiViewTextEmbedder(model=camvr_checkpoint, device=ComponentDevice.from_str("cpu"))
    doc_embedder.warm_up()
    first = doc_embedder.encoder
    doc_embedder.warm_up()
    text_embedder.warm_up()
    assert doc_embedder.encoder is first and text_embedder.encoder is first


def test_document_embedder_attaches_views_and_spans(camvr_checkpoint):
    embedder = MultiViewDocumentEmbedder(model=camvr_checkpoint, progress_bar=False, meta_fields_to_embed=["title"])
    doc = Document(content="The cat sat. The dog ran far away.", meta={"title": "Pets"})
    out = embedder.run([doc])["documents"][0]
    assert out is not doc and VIEWS_KEY not in doc.meta  # the input is not changed
    views = np.asarray(out.meta[VIEWS_KEY])
    assert views.shape == (3, 32)
    assert out.embedding == views[0].tolist()
    spans = out.meta[SPANS_KEY]
    # the title is a snippet of the embedded text but not of the content, so it has no span
    texts = [None if s is None else doc.content[s[0] : s[1]] for s in spans]
    assert "The cat sat." in texts and "The dog ran far away." in texts
    assert out.meta["title"] == "Pets"


def test_text_embedder_matches_encoder(camvr_checkpoint):
    embedder = MultiViewTextEmbedder(model=camvr_checkpoint)
    result = embedder.run("who sat?")
    assert isinstance(result["embedding"], list) and len(result["embedding"]) == 32
    expected = MultiViewEncoder.from_pretrained(camvr_checkpoint).encode_queries(["who sat?"])[0]
    np.testing.assert_allclose(result["embedding"], expected, atol=1e-6)


def test_plain_backbone_is_snippet_mode_only(tiny_backbone):
    embedder = MultiViewDocumentEmbedder(model=tiny_backbone, progress_bar=False)
    out = embedder.run([Document(content="One. Two.")])["documents"][0]
    assert len(out.meta[VIEWS_KEY]) == 3  # global + 2 snippets
    with pytest.raises(ValueError, match="random viewer tokens"):
        MultiViewDocumentEmbedder(model=tiny_backbone, encoder_kwargs={"mode": "mvr"}).warm_up()


def test_document_embedder_bad_input(camvr_checkpoint):
    embedder = MultiViewDocumentEmbedder(model=camvr_checkpoint, progress_bar=False)
    with pytest.raises(TypeError, match="list of Documents"):
        embedder.run("a string")
    with pytest.raises(TypeError, match="list of Documents"):
        embedder.run([Document(content="ok"), "not a document"])
    with pytest.raises(ValueError, match="needs text content"):
        embedder.run([Document(content="fine"), Document(content=None), Document(content="  ")])
    assert embedder.run([]) == {"documents": []}


def test_text_embedder_bad_input(camvr_checkpoint):
    embedder = MultiViewTextEmbedder(model=camvr_checkpoint)
    with pytest.raises(TypeError, match="string"):
        embedder.run([Document(content="x")])
    with pytest.raises(ValueError, match="empty"):
        embedder.run("   ")
