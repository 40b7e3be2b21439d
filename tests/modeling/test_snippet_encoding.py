"""Snippet mode's ``snippet_encoding``: each snippet read on its own (the default of a new encoder) or pooled from
the whole text (late chunking, what saved snippet models and training use)."""

import json

import numpy as np
import pytest

pytest.importorskip("sentence_transformers", minversion="6")

TEXT = "Super Bowl 50 was an American football game. The Broncos beat the Panthers. It was played in Santa Clara."


def snippet(backbone, **options):
    from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter

    return MultiVectorEncoderAdapter.snippet(backbone, device="cpu", num_views=4, **options)


def test_a_new_encoder_reads_each_snippet_on_its_own(tiny_backbone):
    own, late = snippet(tiny_backbone), snippet(tiny_backbone, snippet_encoding="late_chunking")
    assert own.config.snippet_encoding == "own_text" and late.config.snippet_encoding == "late_chunking"
    mine, pooled = own.encode_documents([TEXT])[0], late.encode_documents([TEXT])[0]
    assert mine.spans == pooled.spans[1:] and len(mine.spans) == 3  # the same snippets, no whole-text view
    for view, (start, end) in zip(mine.views, mine.spans, strict=True):
        alone = late.encode_documents([TEXT[start:end]])[0].views[0]  # the whole-text view of the snippet alone
        np.testing.assert_allclose(view, alone, atol=1e-5)
    assert not np.allclose(mine.views, pooled.views[1:], atol=1e-3)  # late chunking's views differ


def test_every_snippet_reads_the_head_first(tiny_backbone):
    own, late = snippet(tiny_backbone), snippet(tiny_backbone, snippet_encoding="late_chunking")
    head = "Super Bowl 50\n"
    encoded = own.encode_documents([head + TEXT], heads=[len(head)])[0]
    assert [(s - len(head), e - len(head)) for s, e in encoded.spans] == own.encode_documents([TEXT])[0].spans
    for view, (start, end) in zip(encoded.views, encoded.spans, strict=True):
        piece = head + (head + TEXT)[start:end]
        np.testing.assert_allclose(view, late.encode_documents([piece])[0].views[0], atol=1e-5)
    with pytest.raises(ValueError, match="heads has 1 entries for 2 texts"):
        own.encode_documents([TEXT, TEXT], heads=[0])


def test_a_text_without_content_is_one_view_of_its_head(tiny_backbone):
    own = snippet(tiny_backbone)
    empty, titled = own.encode_documents(["", "Title\n"], heads=[0, 6])
    assert empty.views.shape[0] == titled.views.shape[0] == 1 and empty.spans == titled.spans == [None]
    assert not np.allclose(empty.views, titled.views)


@pytest.mark.integration
def test_own_text_views_are_sentence_transformers_encodings_of_title_and_snippet(minilm):
    from haystack import Document
    from sentence_transformers import SentenceTransformer

    from haystack_mvr.components.embedders import MultiViewDocumentEmbedder
    from haystack_mvr.views import document_views

    embedder = MultiViewDocumentEmbedder(model=str(minilm), meta_fields_to_embed=["title"], progress_bar=False)
    doc = embedder.run([Document(content=TEXT, meta={"title": "Super Bowl 50"})])["documents"][0]
    spans = [tuple(s) for s in doc.meta["mvr_view_spans"]]
    assert [TEXT[s:e] for s, e in spans] == [
        "Super Bowl 50 was an American football game.",
        "The Broncos beat the Panthers.",
        "It was played in Santa Clara.",
    ]
    expected = SentenceTransformer(str(minilm), device="cpu").encode([f"Super Bowl 50\n{TEXT[s:e]}" for s, e in spans])
    np.testing.assert_allclose(document_views(doc), expected, atol=1e-5)
    assert doc.meta["mvr_encoder"]["snippet_encoding"] == "own_text"


def test_the_encoding_is_in_the_identity_but_not_the_fingerprint(tiny_backbone):
    from haystack_mvr.document_stores.checks import check_query_encoder

    own, late = snippet(tiny_backbone), snippet(tiny_backbone, snippet_encoding="late_chunking")
    a, b = own.identity("m"), late.identity("m")
    assert a["fingerprint"] == b["fingerprint"]  # a store indexed before the option existed keeps its fingerprint
    assert (a["snippet_encoding"], b["snippet_encoding"]) == ("own_text", "late_chunking")
    with pytest.raises(ValueError, match="snippet_encoding"):
        check_query_encoder(b, a)
    check_query_encoder({k: v for k, v in b.items() if k != "snippet_encoding"}, a)  # a store from before: accepted


def test_bad_encodings_are_refused_by_name(tiny_backbone):
    from haystack_mvr.modeling import MultiViewConfig
    from haystack_mvr.modeling.snippet_views import SnippetViews

    for make in (lambda: MultiViewConfig(mode="snippet", snippet_encoding="pooled"), lambda: SnippetViews(
        snippet_encoding="pooled"
    ), lambda: snippet(tiny_backbone, snippet_encoding=1)):  # fmt: skip
        with pytest.raises(ValueError, match="snippet_encoding must be"):
            make()


def test_saved_models_keep_their_encoding_and_older_ones_load_as_late_chunking(tiny_backbone, tmp_path):
    from haystack_mvr.modeling import MultiViewConfig
    from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter, open_encoder

    own = snippet(tiny_backbone)
    own.model.save(str(tmp_path / "own"))
    reloaded = open_encoder(tmp_path / "own", "cpu")
    assert reloaded.config.snippet_encoding == "own_text"
    np.testing.assert_allclose(reloaded.encode_documents([TEXT])[0].views, own.encode_documents([TEXT])[0].views,
                               atol=1e-6)  # fmt: skip
    # a snippet folder saved before the option: its views module has no snippet_encoding
    snippet(tiny_backbone, snippet_encoding="late_chunking").model.save(str(tmp_path / "old"))
    popped = 0
    for path in (tmp_path / "old").rglob("*.json"):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and data.pop("snippet_encoding", None) is not None:
            path.write_text(json.dumps(data))
            popped += 1
    assert popped == 1
    assert MultiVectorEncoderAdapter.load(tmp_path / "old", device="cpu").config.snippet_encoding == "late_chunking"
    # an older multi_view_config.json snippet checkpoint
    saved = MultiViewConfig(mode="snippet", num_views=4).to_dict()
    del saved["snippet_encoding"]
    (tmp_path / "older").mkdir()
    (tmp_path / "older" / "multi_view_config.json").write_text(json.dumps(saved))
    assert MultiViewConfig.load(tmp_path / "older").snippet_encoding == "late_chunking"
    assert MultiViewConfig(mode="snippet").snippet_encoding == "own_text"
