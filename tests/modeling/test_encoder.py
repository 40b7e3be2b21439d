import numpy as np
import pytest
import torch

from haystack_mvr.modeling import MultiViewConfig, max_over_views, view_scores
from haystack_mvr.modeling.inputs import viewer_tokens

st = pytest.importorskip("sentence_transformers", minversion="6")

DOCS = [
    "Super Bowl 50 was an American football game. The Broncos beat the Panthers 24 to 10. "
    "It was played in Santa Clara. Lady Gaga sang the anthem.",
    "A short one.",
    "Warsaw is the capital of Poland. It lies on the Vistula river.",
]


def viewer(backbone, **options):
    """An MVR / CAMVR encoder over ``backbone`` (``viewer_encoder`` options), as the embedders serve it."""
    from haystack_mvr.modeling.encoder_builders import viewer_encoder
    from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter

    return MultiVectorEncoderAdapter(viewer_encoder(backbone, **options))


@pytest.fixture(scope="module", params=["mvr", "camvr", "snippet"])
def encoder(request, tiny_backbone):
    torch.manual_seed(0)
    if request.param == "snippet":
        from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter

        return MultiVectorEncoderAdapter.snippet(tiny_backbone, device="cpu", num_views=4, doc_max_length=64)
    return viewer(tiny_backbone, mode=request.param, views=4, doc_max_length=64)


def test_viewer_tokens_are_special_and_unsplit(tiny_backbone):
    transformer = viewer(tiny_backbone, mode="mvr", views=3).model[0]
    tokenizer, tokens = transformer.tokenizer, ["[VIE]", *viewer_tokens(3)]
    ids = tokenizer.convert_tokens_to_ids(tokens)
    assert len(set(ids)) == 4 and tokenizer.unk_token_id not in ids
    assert all(t in tokenizer.all_special_tokens for t in tokens)
    assert transformer.auto_model.get_input_embeddings().weight.shape[0] == len(tokenizer)


def test_mvr_inputs_follow_the_paper(tiny_backbone):
    enc = viewer(tiny_backbone, mode="mvr", views=3, doc_max_length=16)
    batch = enc.model[0].builder().documents(["hello world"])
    ids = batch.inputs["input_ids"][0].tolist()
    viewer_ids = enc.model[0].tokenizer.convert_tokens_to_ids(viewer_tokens(3))
    assert ids[:3] == viewer_ids and enc.model[0].tokenizer.cls_token_id not in ids
    assert batch.inputs["position_ids"][0].tolist()[:6] == [0, 0, 0, 1, 2, 3]  # hello world [SEP]
    assert ids[5] == enc.model[0].tokenizer.sep_token_id
    query = enc.model[0].builder().queries(["hello"]).inputs["input_ids"][0].tolist()
    assert (
        query[0] == enc.model[0].tokenizer.convert_tokens_to_ids("[VIE]")
        and query[-1] == enc.model[0].tokenizer.sep_token_id
    )


def test_mvr_truncation_keeps_every_viewer(tiny_backbone):
    enc = viewer(tiny_backbone, mode="mvr", views=4, doc_max_length=10)
    batch = enc.model[0].builder().documents(["word " * 50])
    assert batch.inputs["input_ids"].shape[1] == 10
    assert batch.view_mask.all()


def test_camvr_places_a_viewer_before_each_snippet(tiny_backbone):
    enc = viewer(tiny_backbone, mode="camvr", views=3, doc_max_length=64)
    text = "The cat sat. The dog ran far away."
    batch = enc.model[0].builder().documents([text])
    ids = batch.inputs["input_ids"][0].tolist()
    viewer_ids = enc.model[0].tokenizer.convert_tokens_to_ids(viewer_tokens(3))
    positions = [ids.index(v) for v in viewer_ids]
    assert positions[0] == 0 and positions[0] < positions[1] < positions[2]
    assert "position_ids" not in batch.inputs  # ordinary positions
    assert [text[s:e] for s, e in batch.spans[0][:2]] == ["The cat sat.", "The dog ran far away."]
    assert batch.spans[0][2] is None and batch.view_mask[0].all()  # the empty snippet's viewer is still a view
    decoded_first = enc.model[0].tokenizer.decode(ids[positions[0] + 1 : positions[1]])
    assert decoded_first == "the cat sat."


def test_camvr_truncation_keeps_every_viewer(tiny_backbone):
    enc = viewer(tiny_backbone, mode="camvr", views=3, doc_max_length=20)
    text = "Short. " + "A very long middle sentence " * 10 + ". End here."
    ids = enc.model[0].builder().documents([text]).inputs["input_ids"][0].tolist()
    viewer_ids = enc.model[0].tokenizer.convert_tokens_to_ids(viewer_tokens(3))
    assert len(ids) == 20 and all(v in ids for v in viewer_ids)


def test_snippet_views_are_means_of_token_states(tiny_backbone):
    from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter

    enc = MultiVectorEncoderAdapter.snippet(
        tiny_backbone, device="cpu", num_views=4, normalize=False, snippet_encoding="late_chunking"
    )
    text = "The cat sat. The dog ran far away."
    transformer = enc.model[0]
    row = transformer.tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        hidden = transformer.auto_model(**row).last_hidden_state[0]
    encoded = enc.encode_documents([text])[0]
    assert encoded.views.shape[0] == 3  # the whole text and two sentences; no padding views
    np.testing.assert_allclose(encoded.views[0], hidden.mean(dim=0).numpy(), atol=1e-6)
    first = transformer.tokenizer("The cat sat.", add_special_tokens=False)["input_ids"]
    np.testing.assert_allclose(encoded.views[1], hidden[1 : 1 + len(first)].mean(dim=0).numpy(), atol=1e-6)
    assert encoded.spans[0] is None and text[slice(*encoded.spans[1])] == "The cat sat."


def test_batching_and_padding_do_not_change_views(encoder):
    alone = [encoder.encode_documents([d])[0] for d in DOCS]
    together = encoder.encode_documents(DOCS, batch_size=3)
    for a, b in zip(alone, together, strict=True):
        assert a.spans == b.spans
        np.testing.assert_allclose(a.views, b.views, atol=1e-5)
    q1 = encoder.encode_queries(["who won?", "a much longer question about football games"], batch_size=1)
    q2 = encoder.encode_queries(["who won?", "a much longer question about football games"], batch_size=2)
    np.testing.assert_allclose(q1, q2, atol=1e-5)


def test_view_counts(encoder):
    docs = encoder.encode_documents(DOCS)
    counts = [d.views.shape[0] for d in docs]
    if encoder.config.mode == "snippet":
        assert counts == [4, 1, 2]  # one per sentence, each read on its own (4 sentences merge into at most 4)
    else:
        assert counts == [4, 4, 4]
    assert all(d.views.shape[1] == encoder.embedding_dim for d in docs)


@pytest.mark.parametrize("tied", [True, False])
def test_save_and_load_restore_identical_vectors(tiny_backbone, tmp_path, tied):
    from haystack_mvr.modeling.st_encoder import open_encoder

    torch.manual_seed(1)
    enc = viewer(tiny_backbone, mode="camvr", views=3, tied=tied, doc_max_length=64)
    if not tied:  # make the two towers differ, as after training
        with torch.no_grad():
            enc.model[0].sub_modules["query"][0].auto_model.embeddings.word_embeddings.weight.add_(0.5)
    enc.model.save(str(tmp_path / "ckpt"))
    loaded = open_encoder(tmp_path / "ckpt", "cpu")
    assert loaded.config == enc.config and loaded.fingerprint() == enc.fingerprint()
    for a, b in zip(enc.encode_documents(DOCS), loaded.encode_documents(DOCS), strict=True):
        np.testing.assert_array_equal(a.views, b.views)
    np.testing.assert_array_equal(enc.encode_queries(["q one"]), loaded.encode_queries(["q one"]))
    if not tied:
        assert not np.allclose(enc.encode_queries(["q one"]), query_through_documents(loaded))


def query_through_documents(encoder):
    transformer = encoder.model[0].sub_modules["document"][0]
    batch = transformer.builder().queries(["q one"])
    with torch.no_grad():
        return transformer.auto_model(**batch.inputs).last_hidden_state[:, 0].numpy()


def test_loading_with_a_conflicting_option_is_an_error(tiny_backbone, tmp_path):
    from haystack_mvr.modeling.st_encoder import open_encoder

    viewer(tiny_backbone, mode="mvr", views=2).model.save(str(tmp_path / "c"))
    open_encoder(tmp_path / "c", "cpu", mode="mvr")  # agreeing option is fine
    with pytest.raises(ValueError, match="num_views"):
        open_encoder(tmp_path / "c", "cpu", num_views=8)


def test_config_validation():
    with pytest.raises(ValueError, match="mode"):
        MultiViewConfig(mode="colbert")
    with pytest.raises(ValueError, match="num_views"):
        MultiViewConfig(num_views=0)
    with pytest.raises(ValueError, match="tied"):
        MultiViewConfig(mode="snippet", tied=False)


def test_viewer_init_from_cls(tiny_backbone, caplog):
    with caplog.at_level("WARNING", logger="haystack_mvr.modeling.inputs"):
        enc = viewer(tiny_backbone, mode="camvr", views=2, viewer_init="cls")
    assert "only their positions tell them apart" in caplog.text
    weights = enc.model[0].auto_model.get_input_embeddings().weight
    ids = enc.model[0].tokenizer.convert_tokens_to_ids(["[VIE]", "[VIE_1]", "[VIE_2]"])
    for i in ids:
        torch.testing.assert_close(weights[i], weights[enc.model[0].tokenizer.cls_token_id])
    single = viewer(tiny_backbone, mode="mvr", views=1, viewer_init="cls").model[0]
    weights = single.auto_model.get_input_embeddings().weight
    token, cls = single.tokenizer.convert_tokens_to_ids("[VIE_1]"), single.tokenizer.cls_token_id
    torch.testing.assert_close(weights[token], weights[cls])


def test_viewer_init_from_cls_is_refused_for_several_mvr_viewers(tiny_backbone):
    # k copies of [CLS] at one shared position id are k identical views, whatever the training does.
    with pytest.raises(ValueError, match="would stay identical"):
        viewer(tiny_backbone, mode="mvr", views=2, viewer_init="cls")
    from haystack_mvr.modeling.viewer_transformer import ViewerTransformer

    with pytest.raises(ValueError, match="would stay identical"):
        ViewerTransformer(str(tiny_backbone), mode="mvr", num_views=3, viewer_position=1, viewer_init="cls")


def test_max_over_views_ignores_masked_views():
    q = torch.tensor([[1.0, 0.0]])
    views = torch.tensor([[[0.5, 0.0], [9.0, 0.0]], [[0.2, 0.0], [0.1, 0.0]]])
    mask = torch.tensor([[True, False], [True, True]])
    values, idx = max_over_views(view_scores(q, views), mask)
    torch.testing.assert_close(values, torch.tensor([[0.5, 0.2]]))
    assert idx.tolist() == [[0, 0]]


def test_viewer_attention_rows_are_distributions(tiny_backbone):
    enc = viewer(tiny_backbone, mode="camvr", views=3, doc_max_length=64)
    attn = enc.viewer_attention(DOCS[:2])
    assert attn[0].shape[0] == 3
    np.testing.assert_allclose(attn[0].sum(axis=1), 1.0, atol=1e-5)


@pytest.mark.integration
def test_snippet_mode_global_view_and_query_match_sentence_transformers(minilm):
    from sentence_transformers import SentenceTransformer

    from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter

    st = SentenceTransformer(str(minilm), device="cpu")
    enc = MultiVectorEncoderAdapter.snippet(minilm, device="cpu", snippet_encoding="late_chunking")
    assert enc.config.normalize and enc.config.doc_max_length == 256
    expected = st.encode(DOCS, convert_to_numpy=True)
    got = np.stack([d.views[0] for d in enc.encode_documents(DOCS)])
    np.testing.assert_allclose(got, expected, atol=1e-5)
    np.testing.assert_allclose(enc.encode_queries(["who won?"]), st.encode(["who won?"]), atol=1e-5)


def test_random_viewer_init_is_drawn_at_the_vocabulary_scale(tiny_backbone, tmp_path):
    # A backbone whose token embeddings are 50x larger than its initializer_range: a draw at initializer_range
    # would leave the viewers tiny next to the shared position embedding, and the MVR views would collapse.
    from transformers import AutoModel, AutoTokenizer

    backbone = AutoModel.from_pretrained(tiny_backbone)
    with torch.no_grad():
        backbone.get_input_embeddings().weight.mul_(50.0)
    backbone.save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(tiny_backbone).save_pretrained(tmp_path)

    enc = viewer(tmp_path, mode="mvr", views=4)
    weight = enc.model[0].auto_model.get_input_embeddings().weight.detach()
    ids = enc.model[0].tokenizer.convert_tokens_to_ids(viewer_tokens(4))
    vocabulary = weight[: min(ids)]
    ratio = weight[ids].std(dim=0).mean() / vocabulary.std(dim=0).mean()
    assert 0.5 < float(ratio) < 2.0
    assert torch.cdist(weight[ids], weight[ids]).triu(1).max() > 0  # four distinct viewers


def test_viewer_position_moves_every_viewer_and_the_document_together(tiny_backbone):
    paper = viewer(tiny_backbone, mode="mvr", views=3)
    shifted = viewer(tiny_backbone, mode="mvr", views=3, viewer_position=1)
    a = paper.model[0].builder().documents(["One two three."]).inputs["position_ids"][0]
    b = shifted.model[0].builder().documents(["One two three."]).inputs["position_ids"][0]
    assert a[:3].tolist() == [0, 0, 0] and b[:3].tolist() == [1, 1, 1]
    assert torch.equal(b[3:], a[3:] + 1)  # the document keeps its order, one position later


def test_viewer_position_is_saved_and_checked(tiny_backbone, tmp_path):
    from haystack_mvr.modeling.st_encoder import open_encoder

    viewer(tiny_backbone, mode="mvr", views=2, viewer_position=1).model.save(str(tmp_path / "ckpt"))
    assert open_encoder(tmp_path / "ckpt", "cpu").config.viewer_position == 1
    with pytest.raises(ValueError, match="viewer_position"):
        MultiViewConfig(mode="camvr", viewer_position=1)
    with pytest.raises(ValueError, match="non-negative"):
        MultiViewConfig(viewer_position=-1)
