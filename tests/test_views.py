import copy
import dataclasses
import json
import pickle

import numpy as np
import pytest
from haystack import Document

from haystack_mvr.views import (
    MATCHED_SCOPE_KEY,
    MATCHED_SPAN_KEY,
    MATCHED_TEXT_KEY,
    MATCHED_VIEW_KEY,
    SPANS_KEY,
    VIEWS_KEY,
    PackedViews,
    annotate_match,
    annotated_copy,
    attach_views,
    document_views,
    embedding_repeats_first_view,
    extract_views,
    snippet_text,
)


def test_attach_and_extract_round_trip():
    doc = Document(content="abc def", meta={"lang": "en"})
    views = np.arange(6, dtype=np.float32).reshape(3, 2)
    out = attach_views(doc, views, [(0, 3), None, (4, 7)])
    assert out is not doc and doc.meta == {"lang": "en"} and doc.embedding is None
    assert out.embedding == [0.0, 1.0]
    got, spans, meta = extract_views(out)
    np.testing.assert_array_equal(got, views)
    assert spans == [(0, 3), None, (4, 7)] and meta == {"lang": "en"}
    assert snippet_text(out.content, spans[2]) == "def"


def test_views_survive_document_serialization():
    out = attach_views(Document(content="x"), np.ones((2, 4), dtype=np.float32))
    again = Document.from_dict(out.to_dict())
    np.testing.assert_array_equal(extract_views(again)[0], np.ones((2, 4)))


def test_plain_embedding_is_one_view_and_no_vector_is_none():
    views, spans, _ = extract_views(Document(content="x", embedding=[1.0, 2.0]))
    assert views.shape == (1, 2) and spans is None
    assert extract_views(Document(content="x"))[0] is None


@pytest.mark.parametrize(
    ("views", "message"),
    [([[1.0, float("nan")]], "NaN"), ([[1.0], [1.0, 2.0]], "matrix"), ([], "non-empty"), ([["a"]], "numbers")],
)
def test_bad_views_are_rejected(views, message):
    doc = Document(content="x", meta={VIEWS_KEY: views})
    with pytest.raises(ValueError, match=message):
        extract_views(doc)


def test_span_count_must_match():
    with pytest.raises(ValueError, match="spans"):
        attach_views(Document(content="x"), np.ones((2, 2)), [(0, 1)])
    doc = Document(content="x", meta={VIEWS_KEY: [[1.0]], SPANS_KEY: [[0, 1], [1, 2]]})
    with pytest.raises(ValueError, match="one entry per view"):
        extract_views(doc)


def test_attached_views_are_a_json_string_that_keeps_documents_comparable():
    views = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    out = attach_views(Document(id="a", content="x"), views)
    packed = out.meta[VIEWS_KEY]
    assert isinstance(packed, str) and packed.startswith("float32:3x5:")
    assert out == out and out == copy.deepcopy(out)  # a numpy matrix in meta makes even `out == out` raise
    again = Document.from_dict(json.loads(json.dumps(out.to_dict())))
    assert again == out and type(again.meta[VIEWS_KEY]) is str
    np.testing.assert_array_equal(document_views(again), views)
    np.testing.assert_array_equal(document_views(out), views)


def test_packed_views_are_immutable_and_copied_for_free():
    packed = PackedViews(np.ones((2, 3)))
    assert copy.deepcopy(packed) is packed and copy.copy(packed) is packed
    assert packed.matrix.dtype == np.float32 and not packed.matrix.flags.writeable
    with pytest.raises(ValueError):
        packed.matrix.flags.writeable = True
    unpickled = pickle.loads(pickle.dumps(packed))
    assert type(unpickled) is PackedViews and unpickled == packed
    np.testing.assert_array_equal(unpickled.matrix, packed.matrix)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1.0, 2.0", "must be 'float32"),
        ("float32:1x2:!!!!", "not valid base64"),
        ("float32:2x2:" + PackedViews(np.ones((1, 2))).split(":")[2], "not the 2x2"),
        ("float32:0x4:", "non-empty"),
    ],
)
def test_a_malformed_packed_string_is_refused(text, message):
    with pytest.raises(ValueError, match=message):
        extract_views(Document(id="bad", content="x", meta={VIEWS_KEY: text}))


def test_views_in_any_accepted_form_read_the_same():
    views = np.arange(6, dtype=np.float32).reshape(2, 3)
    for raw in (views, views.tolist(), PackedViews(views), str(PackedViews(views))):
        np.testing.assert_array_equal(document_views(Document(content="x", meta={VIEWS_KEY: raw})), views)


def test_the_attached_embedding_is_view_zero_as_a_plain_list():
    views = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = attach_views(Document(id="a", content="x"), views)
    embedding = out.embedding
    assert type(embedding) is list and embedding == [0.0, 1.0, 2.0]
    assert embedding_repeats_first_view(embedding, views) and embedding_repeats_first_view(tuple(embedding), views)
    copied = copy.deepcopy(out)  # what a Haystack pipeline hands the next component
    assert embedding_repeats_first_view(copied.embedding, document_views(copied))
    assert not embedding_repeats_first_view(embedding, views * 2)
    embedding[1] = 5.0
    assert not embedding_repeats_first_view(embedding, views)


def test_annotate_match_scores_by_the_best_view_and_prefers_a_snippet_on_a_tie():
    stored = Document(id="a", content="First part. Second part.", meta={SPANS_KEY: [None, [0, 11], [12, 24]], "x": 1})
    views = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    hit = annotate_match(stored, views, np.array([1.0, 0.0]))
    assert hit.score == 1.0 and hit.meta[MATCHED_VIEW_KEY] == 1 and hit.meta[MATCHED_SCOPE_KEY] == "snippet"
    assert hit.meta[MATCHED_SPAN_KEY] == [0, 11] and hit.meta[MATCHED_TEXT_KEY] == "First part."
    hit = annotate_match(stored, views * np.array([[2.0], [1.0], [1.0]], dtype=np.float32), np.array([1.0, 0.5]))
    assert hit.score == 2.0 and hit.meta[MATCHED_VIEW_KEY] == 0 and hit.meta[MATCHED_SCOPE_KEY] == "document"
    assert hit.meta[MATCHED_SPAN_KEY] == [0, 11]  # the best snippet still shows
    assert stored.meta == {SPANS_KEY: [None, [0, 11], [12, 24]], "x": 1} and stored.score is None
    assert hit.embedding is None and VIEWS_KEY not in hit.meta and hit.id == "a" and type(hit) is Document


def test_annotated_copy_is_annotate_match_with_the_callers_scores_and_meta():
    stored = Document(id="a", content="First part. Second part.", meta={SPANS_KEY: [[0, 11], [12, 24]]})
    views = np.array([[0.6, 0.8], [0.0, 1.0]], dtype=np.float32)
    query = np.array([0.3, 0.7], dtype=np.float32)
    for return_embedding in (False, True):
        expected = annotate_match(stored, views, query, return_embedding=return_embedding)
        got = annotated_copy(
            stored, dict(stored.meta), (views @ query).tolist(), views, return_embedding=return_embedding
        )
        assert got == expected and got.to_dict() == expected.to_dict()
        assert Document.from_dict(got.to_dict()) == got
    assert expected.embedding == views[0].tolist() and document_views(expected).tolist() == views.tolist()


@pytest.mark.filterwarnings("ignore:Mutating attribute")  # Haystack's own __post_init__ on a subclass
def test_annotate_match_keeps_a_document_subclass():
    @dataclasses.dataclass
    class Page(Document):
        pass

    hit = annotate_match(Page(id="p", content="c"), np.array([[1.0, 0.0]]), np.array([0.5, 0.0]))
    assert type(hit) is Page and hit.score == 0.5 and hit.meta[MATCHED_SCOPE_KEY] == "document"
