"""The snippet mode as sentence-transformers 6 modules: a saved snippet checkpoint is a MultiVectorEncoder folder."""

import numpy as np
import pytest
from haystack import Document

from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder
from haystack_mvr.views import document_views

st = pytest.importorskip("sentence_transformers", minversion="6")

TEXTS = [
    "Warsaw is the capital of Poland. It lies on the Vistula. Its old town was rebuilt after the war.",
    "Short one.",
    "First point. Second point. Third point. Fourth point. Fifth point.",
]
QUERY = "Which river flows through Warsaw?"
# a snippet checkpoint of encoder_builders.snippet_encoder, as training saves one, reads its snippets by late chunking
LATE = {"num_views": 3, "snippet_encoding": "late_chunking"}


@pytest.fixture(scope="module")
def snippet_checkpoint(tiny_backbone, tmp_path_factory):
    from haystack_mvr.modeling.encoder_builders import snippet_encoder

    path = tmp_path_factory.mktemp("snippet-st")
    snippet_encoder(tiny_backbone, num_snippets=3).save(str(path))
    return path


def test_multi_vector_encoder_loads_it_and_matches_the_haystack_embedders(snippet_checkpoint, tiny_backbone):
    model = st.MultiVectorEncoder(str(snippet_checkpoint), device="cpu", trust_remote_code=True)
    assert [type(m).__name__ for m in model] == ["SnippetTransformer", "SnippetViews"]
    views = model.encode_document(TEXTS)
    query = model.encode_query([QUERY])[0]
    assert query.shape == (1, 32)

    embedded = MultiViewDocumentEmbedder(model=tiny_backbone, progress_bar=False, encoder_kwargs=LATE)
    docs = embedded.run([Document(content=t) for t in TEXTS])["documents"]
    for ours, theirs in zip(docs, views, strict=True):
        np.testing.assert_allclose(document_views(ours), theirs.numpy(), atol=1e-5)
    expected = MultiViewTextEmbedder(model=tiny_backbone, encoder_kwargs=LATE).run(QUERY)["embedding"]
    np.testing.assert_allclose(query[0].numpy(), expected, atol=1e-5)
    # MaxSim of a one-vector query is the max over views (MVR Eq. 4)
    scores = model.similarity([query], views)[0].numpy()
    np.testing.assert_allclose(scores, [float((v.numpy() @ query[0].numpy()).max()) for v in views], rtol=1e-5)


def test_the_haystack_embedders_load_the_st_checkpoint(snippet_checkpoint, tiny_backbone):
    from_st = MultiViewDocumentEmbedder(model=snippet_checkpoint, progress_bar=False)
    from_backbone = MultiViewDocumentEmbedder(model=tiny_backbone, progress_bar=False, encoder_kwargs=LATE)
    docs = [Document(content=t) for t in TEXTS]
    for a, b in zip(from_st.run(docs)["documents"], from_backbone.run(docs)["documents"], strict=True):
        np.testing.assert_allclose(document_views(a), document_views(b), atol=1e-6)
    assert from_st.encoder.config.num_views == 3 and from_st.encoder.config.mode == "snippet"
    assert type(from_st.encoder).__name__ == "MultiVectorEncoderAdapter"  # served by sentence-transformers


def test_without_trust_remote_code_sentence_transformers_refuses_foreign_modules(snippet_checkpoint):
    with pytest.raises(ValueError, match="trust_remote_code"):
        st.MultiVectorEncoder(str(snippet_checkpoint), device="cpu")


# ---------------------------------------------------------------------------------------------- MVR / CAMVR
VIEWER_CASES = {
    "mvr": {"mode": "mvr"},
    "mvr-position-1": {"mode": "mvr", "viewer_position": 1},
    "camvr": {"mode": "camvr"},
    "camvr-untied": {"mode": "camvr", "tied": False},
}


@pytest.fixture(scope="module", params=sorted(VIEWER_CASES))
def viewer_pair(request, tiny_backbone, tmp_path_factory):
    """An older ``multi_view_config.json`` checkpoint, what its older host computed, and its converted folder."""
    from haystack_mvr.modeling.encoder_builders import checkpoint_encoder
    from tests.conftest import old_host_outputs, save_tiny_checkpoint

    old = save_tiny_checkpoint(
        tiny_backbone, tmp_path_factory.mktemp(f"old-{request.param}"), num_views=3, doc_max_length=48,
        **VIEWER_CASES[request.param],
    )  # fmt: skip
    path = tmp_path_factory.mktemp(f"st-{request.param}")
    checkpoint_encoder(old).save(str(path))
    return old, old_host_outputs(old, TEXTS, QUERIES), path


QUERIES = [QUERY, "a much longer question about the old town of Warsaw"]


def test_the_converted_folder_gives_the_older_hosts_views(viewer_pair):
    from haystack_mvr.modeling.config import MultiViewConfig

    old, before, path = viewer_pair
    model = st.MultiVectorEncoder(str(path), device="cpu", trust_remote_code=True)
    names = [type(m).__name__ for m in model]
    assert names == (["ViewerTransformer", "ViewerPooling"] if MultiViewConfig.load(old).tied else ["Router"])
    for ours, views in zip(before["views"], model.encode_document(TEXTS), strict=True):
        assert ours.shape == tuple(views.shape) == (3, 32)
        np.testing.assert_allclose(ours, views.numpy(), rtol=0, atol=1e-6)
    queries = model.encode_query(QUERIES)
    np.testing.assert_allclose(np.stack([q[0].numpy() for q in queries]), before["queries"], rtol=0, atol=1e-6)


def test_the_older_checkpoint_converts_on_load_with_its_config_and_fingerprint(viewer_pair):
    from haystack_mvr.modeling.config import MultiViewConfig
    from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter, open_encoder

    old, before, path = viewer_pair
    for encoder in (open_encoder(old, "cpu"), MultiVectorEncoderAdapter.load(path, device="cpu")):
        assert type(encoder.model).__name__ == "MultiVectorEncoder"
        assert encoder.config == MultiViewConfig(**{**MultiViewConfig.load(old).to_dict(), "base_model": ""})
        assert encoder.fingerprint() == before["fingerprint"]  # what a store recorded with the older host
        for ours, theirs, spans in zip(encoder.encode_documents(TEXTS), before["views"], before["spans"], strict=True):
            assert ours.spans == spans
            np.testing.assert_allclose(ours.views, theirs, atol=1e-6)
        np.testing.assert_allclose(encoder.encode_queries(QUERIES), before["queries"], atol=1e-6)
    with pytest.raises(ValueError, match="num_views"):
        open_encoder(old, "cpu", num_views=5)
    with pytest.raises(ValueError, match="num_views"):
        open_encoder(path, "cpu", num_views=5)


def test_the_viewer_tokens_are_saved_with_the_tokenizer(viewer_pair):
    from transformers import AutoTokenizer

    from haystack_mvr.modeling.config import MultiViewConfig
    from haystack_mvr.modeling.inputs import QUERY_VIEWER, viewer_tokens

    old, _, path = viewer_pair
    folder = path if MultiViewConfig.load(old).tied else path / "document_0_ViewerTransformer"
    tokenizer, before = AutoTokenizer.from_pretrained(folder), AutoTokenizer.from_pretrained(old)
    for token in (QUERY_VIEWER, *viewer_tokens(3)):
        assert tokenizer.tokenize(f"a {token} b") == ["a", token, "b"]
        assert tokenizer.convert_tokens_to_ids(token) == before.convert_tokens_to_ids(token)


def test_viewer_encoder_builds_mvr_inputs_as_the_papers(tiny_backbone, tmp_path):
    from haystack_mvr.modeling.encoder_builders import viewer_encoder
    from haystack_mvr.modeling.inputs import QUERY_VIEWER, viewer_tokens

    model = viewer_encoder(tiny_backbone, mode="mvr", views=4, viewer_position=1, doc_max_length=32)
    transformer = model[0]
    tokenizer = transformer.tokenizer
    features = transformer.preprocess(["the cat sat on the mat"], task="document")
    ids, positions = features["input_ids"][0].tolist(), features["position_ids"][0].tolist()
    assert ids[:4] == tokenizer.convert_tokens_to_ids(viewer_tokens(4)) and ids[-1] == tokenizer.sep_token_id
    assert tokenizer.cls_token_id not in ids  # the viewers replace [CLS]
    assert positions == [1] * 4 + list(range(2, 2 + len(ids) - 4))  # all viewers at p, the text from p + 1
    query = transformer.preprocess(["the cat"], task="query")
    assert query["input_ids"][0, 0] == tokenizer.convert_tokens_to_ids(QUERY_VIEWER) and "position_ids" not in query
    short = transformer.preprocess(["the cat sat on the mat"], task="document", max_length=7)  # the data collator's
    assert short["input_ids"].shape[1] == 7 and short["input_ids"][0, -1] == tokenizer.sep_token_id  # 4 + 2 + [SEP]
    docs = model.encode_document(["the cat sat on the mat", "a dog"])
    assert [tuple(d.shape) for d in docs] == [(4, 32), (4, 32)]
    assert model.encode_query(["the cat"])[0].shape == (1, 32)

    model.save(str(tmp_path / "mvr"))  # the tokens travel with the folder, the embeddings are not drawn again
    again = st.MultiVectorEncoder(str(tmp_path / "mvr"), device="cpu", trust_remote_code=True)
    for a, b in zip(docs, again.encode_document(["the cat sat on the mat", "a dog"]), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_viewer_transformer_rejects_snippet_mode(tiny_backbone):
    from haystack_mvr.modeling.viewer_transformer import ViewerTransformer

    with pytest.raises(ValueError, match="SnippetTransformer"):
        ViewerTransformer(str(tiny_backbone), mode="snippet")


def test_an_older_snippet_checkpoint_converts_and_keeps_its_views(tiny_backbone, tmp_path):
    """A backbone folder with a snippet ``multi_view_config.json`` (the format before issue 16) still loads."""
    import shutil

    from haystack_mvr.modeling import MultiViewConfig
    from haystack_mvr.modeling.encoder_builders import checkpoint_encoder
    from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter, open_encoder

    old = tmp_path / "old"
    shutil.copytree(tiny_backbone, old)
    MultiViewConfig(mode="snippet", num_views=3, query_max_length=8, doc_max_length=64).save(old)
    fresh = MultiVectorEncoderAdapter.snippet(tiny_backbone, device="cpu", num_views=3, query_max_length=8)
    loaded = open_encoder(old, "cpu")
    assert loaded.config.num_views == 3 and loaded.config.query_max_length == 8
    with pytest.raises(ValueError, match="cannot override"):
        open_encoder(old, "cpu", num_views=5)
    converted = checkpoint_encoder(old)
    converted.save(str(tmp_path / "new"))
    again = MultiVectorEncoderAdapter.load(tmp_path / "new", device="cpu")
    long_query = "which river flows through the old capital city of Poland?"  # longer than 8 tokens
    for other in (loaded, again):
        np.testing.assert_allclose(other.encode_queries([long_query]), fresh.encode_queries([long_query]), atol=1e-6)
        for a, b in zip(other.encode_documents(TEXTS), fresh.encode_documents(TEXTS), strict=True):
            assert a.spans == b.spans
            np.testing.assert_allclose(a.views, b.views, atol=1e-6)
    assert again.identity("m") == loaded.identity("m")


def test_the_adapter_refuses_other_folders(tiny_backbone):
    from haystack_mvr.modeling.loading import is_multi_view_checkpoint
    from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter

    assert not is_multi_view_checkpoint(str(tiny_backbone))
    with pytest.raises(ValueError, match="not a haystack-mvr sentence-transformers checkpoint"):
        MultiVectorEncoderAdapter.load(tiny_backbone)


def test_viewer_attention_is_the_same_before_and_after_conversion(viewer_pair):
    from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter, open_encoder

    old, _, path = viewer_pair
    adapter = MultiVectorEncoderAdapter.load(path, device="cpu")
    for a, b in zip(
        adapter.viewer_attention(TEXTS[:2]), open_encoder(old, "cpu").viewer_attention(TEXTS[:2]), strict=True
    ):
        assert a.shape[0] == 3
        np.testing.assert_allclose(a, b, atol=1e-6)
        np.testing.assert_allclose(a.sum(axis=1), 1.0, atol=1e-5)


@pytest.mark.integration
@pytest.mark.parametrize(("mode", "options"), [("mvr", {"viewer_position": 1}), ("camvr", {})])
def test_minilm_views_are_the_same_through_sentence_transformers(minilm, tmp_path, mode, options):
    from haystack_mvr.modeling.st_encoder import open_encoder
    from tests.conftest import old_host_outputs, save_tiny_checkpoint

    old = save_tiny_checkpoint(minilm, tmp_path / "old", mode, 8, doc_max_length=256, **options)
    before = old_host_outputs(old, TEXTS, [QUERY])
    adapter = open_encoder(old, "cpu")
    for a, views, spans in zip(adapter.encode_documents(TEXTS), before["views"], before["spans"], strict=True):
        assert a.spans == spans
        np.testing.assert_allclose(a.views, views, rtol=0, atol=1e-6)
    np.testing.assert_allclose(adapter.encode_queries([QUERY]), before["queries"], rtol=0, atol=1e-6)
    assert adapter.fingerprint() == before["fingerprint"]


@pytest.mark.parametrize("mode", ["mvr", "camvr"])
def test_a_sentence_transformers_loss_trains_the_viewer_tokens(tiny_backbone, mode):
    """What MultiVectorEncoderTrainer does per batch: preprocess per task, a multi-vector loss, backward."""
    import torch
    from sentence_transformers.multi_vector_encoder.losses import MultiVectorMultipleNegativesRankingLoss

    from haystack_mvr.modeling.encoder_builders import viewer_encoder
    from haystack_mvr.modeling.inputs import QUERY_VIEWER, viewer_tokens

    torch.manual_seed(0)
    model = viewer_encoder(tiny_backbone, mode=mode, views=3, doc_max_length=48, query_max_length=16).train()
    queries = model.preprocess(["who sat?", "who ran?"], task="query")
    texts = ["The cat sat. It was tired.", "The dog ran. Far away."]
    documents = model.preprocess(texts, task="document", max_length=32)
    queries["task"], documents["task"] = "query", "document"
    loss = MultiVectorMultipleNegativesRankingLoss(model)([queries, documents], None)
    loss.backward()
    grad = model[0].auto_model.get_input_embeddings().weight.grad
    ids = model.tokenizer.convert_tokens_to_ids([QUERY_VIEWER, *viewer_tokens(3)])
    assert torch.isfinite(loss) and (grad[ids].norm(dim=1) > 0).all()


def test_snippet_document_columns_share_one_forward_pass_with_the_same_views(snippet_checkpoint):
    """A training step's positive and negative columns concatenate (sentence ranges are a padded tensor), and the
    views of the merged pass are those of a pass per column, padding sentences left out."""
    import torch
    from sentence_transformers.base.losses.merged_forward import merge_feature_batches

    from haystack_mvr.modeling.st_features import SENTENCES, sentence_rows

    model = st.MultiVectorEncoder(str(snippet_checkpoint), device="cpu", trust_remote_code=True)
    model.eval()
    positives = model.preprocess(TEXTS[:2], task="document")  # 3 and 1 sentences
    negatives = model.preprocess([TEXTS[2], ""], task="document")  # 5 and none
    assert positives[SENTENCES].shape[1:] == (3, 4) and negatives[SENTENCES].shape[1:] == (5, 4)
    merged = merge_feature_batches([positives, negatives])
    assert merged is not None, "the document columns no longer merge: each gets its own forward pass"
    assert sentence_rows(merged[SENTENCES]) == sentence_rows(positives[SENTENCES]) + sentence_rows(negatives[SENTENCES])
    assert sentence_rows(negatives[SENTENCES])[1] == []
    with torch.no_grad():
        together = model(dict(merged), task="document")
        apart = [model(dict(f), task="document") for f in (positives, negatives)]
    views = torch.cat([a["token_embeddings"] for a in apart])
    mask = torch.cat([a["attention_mask"] for a in apart])
    assert torch.equal(together["attention_mask"], mask)
    torch.testing.assert_close(together["token_embeddings"][mask], views[mask], atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------------------------ the class paths checkpoints name
def _module_types(folder) -> dict[str, str]:
    """Every module class a saved folder names: in ``modules.json`` and in any ``Router``'s ``router_config.json``."""
    import json

    types = {m["path"]: m["type"] for m in json.loads((folder / "modules.json").read_text())}
    for router in folder.rglob("router_config.json"):
        types.update(json.loads(router.read_text())["types"])
    return types


def _rename_types(folder, rename) -> None:
    """Rewrite the module class paths ``folder``'s ``modules.json`` and ``router_config.json`` files name."""
    import json

    listing = folder / "modules.json"
    listing.write_text(json.dumps([{**m, "type": rename(m["type"])} for m in json.loads(listing.read_text())]))
    for router in folder.rglob("router_config.json"):
        config = json.loads(router.read_text())
        config["types"] = {route: rename(kind) for route, kind in config["types"].items()}
        router.write_text(json.dumps(config))


@pytest.mark.parametrize("kind", ["snippet", "camvr-untied"])
def test_a_checkpoint_names_its_classes_where_they_are_defined_and_one_naming_st_modules_loads(
    snippet_checkpoint, tiny_backbone, tmp_path, kind
):
    """A checkpoint names each module class by the module it is defined in. Checkpoints saved earlier name
    ``haystack_mvr.modeling.st_modules.<Class>``: such a folder loads (``haystack_mvr.moved_paths``, warning with the
    new path) into the same classes and views, and saved again it names the new paths."""
    import shutil

    from haystack_mvr.modeling import snippet_transformer, snippet_views, viewer_pooling, viewer_transformer
    from haystack_mvr.modeling.encoder_builders import viewer_encoder

    folder = tmp_path / "new"
    if kind == "snippet":
        homes = {snippet_transformer: "SnippetTransformer", snippet_views: "SnippetViews"}
        shutil.copytree(snippet_checkpoint, folder)
    else:
        homes = {viewer_transformer: "ViewerTransformer", viewer_pooling: "ViewerPooling"}
        viewer_encoder(tiny_backbone, mode="camvr", views=2, doc_max_length=32, tied=False).save(str(folder))
    classes = {getattr(module, name) for module, name in homes.items()}
    new_paths = {f"{module.__name__}.{name}" for module, name in homes.items()}
    ours = {t for t in _module_types(folder).values() if t.startswith("haystack_mvr.")}
    assert ours == new_paths and all(getattr(m, n).__module__ == m.__name__ for m, n in homes.items())
    views = st.MultiVectorEncoder(str(folder), device="cpu", trust_remote_code=True).encode_document(TEXTS[:2])

    old_folder = tmp_path / "old"
    shutil.copytree(folder, old_folder)
    _rename_types(old_folder, lambda t: f"haystack_mvr.modeling.st_modules.{t.rpartition('.')[2]}" if t in ours else t)
    old_paths = {f"haystack_mvr.modeling.st_modules.{name}" for name in homes.values()}
    assert {t for t in _module_types(old_folder).values() if t.startswith("haystack_mvr.")} == old_paths
    with pytest.warns(FutureWarning) as caught:
        model = st.MultiVectorEncoder(str(old_folder), device="cpu", trust_remote_code=True)
    messages = " ".join(str(w.message) for w in caught)
    assert all(f"{path} is an old path of" in messages for path in old_paths)
    assert all(f"of {path}," in messages for path in new_paths)
    assert {type(m) for m in model.modules()} >= classes  # the very classes of their own modules
    for a, b in zip(views, model.encode_document(TEXTS[:2]), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    again_folder = tmp_path / "again"
    model.save(str(again_folder))  # saved again: the new names
    assert _module_types(again_folder) == _module_types(folder)
