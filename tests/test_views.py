import numpy as np
import pytest
from haystack import Document

from haystack_mvr.views import SPANS_KEY, VIEWS_KEY, attach_views, extract_views, snippet_text


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
