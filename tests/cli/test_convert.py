"""``haystack-mvr convert``: a multi_view_config.json checkpoint becomes a sentence-transformers folder."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from haystack_mvr.cli.main import main
from haystack_mvr.modeling import MultiViewConfig
from tests.conftest import old_host_outputs, save_tiny_checkpoint

pytest.importorskip("sentence_transformers", minversion="6")

TEXTS = ["The cat sat. The dog ran far away. Birds sing in the tall trees.", "Short one."]


@pytest.fixture(scope="module", params=["mvr", "camvr-untied", "snippet"])
def old_checkpoint(request, tiny_backbone, tmp_path_factory):
    """A multi_view_config.json checkpoint (a snippet one written as the older format wrote it)."""
    mode = request.param.split("-")[0]
    path = tmp_path_factory.mktemp(f"old-{request.param}")
    if mode == "snippet":  # the older format: the backbone with its snippet options in multi_view_config.json
        shutil.copytree(tiny_backbone, path, dirs_exist_ok=True)
        saved = MultiViewConfig(mode="snippet", num_views=3, doc_max_length=64).to_dict()
        del saved["snippet_encoding"]  # the older format had no such field: it loads as late chunking
        (path / "multi_view_config.json").write_text(json.dumps(saved), encoding="utf-8")
        return path
    return save_tiny_checkpoint(tiny_backbone, path, mode, 3, tied=not request.param.endswith("untied"))


def old_vectors(path):
    """The checkpoint's document views and query vectors as its older host computed them."""
    if MultiViewConfig.load(path).mode == "snippet":  # snippet mode was served by sentence-transformers already
        from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter

        old = MultiVectorEncoderAdapter.snippet(path, device="cpu")
        return [d.views for d in old.encode_documents(TEXTS)], old.encode_queries(["who ran?"])
    before = old_host_outputs(path, TEXTS, ["who ran?"])
    return before["views"], before["queries"]


def test_convert_gives_the_same_views(old_checkpoint, tmp_path, capsys):
    from sentence_transformers import MultiVectorEncoder

    assert main(["convert", str(old_checkpoint), str(tmp_path / "new")]) == 0
    assert "same views and queries" in capsys.readouterr().out
    views, query = old_vectors(old_checkpoint)
    new = MultiVectorEncoder(str(tmp_path / "new"), device="cpu", trust_remote_code=True)
    for a, b in zip(views, new.encode_document(TEXTS), strict=True):
        np.testing.assert_allclose(a, b.numpy(), rtol=0, atol=1e-6)
    queries = np.stack([q[0].numpy() for q in new.encode_query(["who ran?"])])
    np.testing.assert_allclose(query, queries, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda tmp, tiny: (tmp / "missing", tmp / "out"), "no such checkpoint folder"),
        (lambda tmp, tiny: (tiny, tmp / "out"), "has no multi_view_config.json"),
        (lambda tmp, tiny: (tiny / "config.json", tmp / "out"), "is a file"),
    ],
)
def test_a_bad_path_is_one_line(make, expected, tmp_path, tiny_backbone, capsys):
    source, target = make(tmp_path, tiny_backbone)
    assert main(["convert", str(source), str(target)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and expected in err, err
    assert not target.exists()


def test_an_existing_output_or_a_converted_folder_is_refused(old_checkpoint, tmp_path, capsys):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file.txt").write_text("x")
    assert main(["convert", str(old_checkpoint), str(tmp_path / "taken")]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["convert", str(old_checkpoint), str(tmp_path / "st"), "--no-check"]) == 0
    capsys.readouterr()
    assert main(["convert", str(tmp_path / "st"), str(tmp_path / "again")]) == 2
    assert "already a sentence-transformers folder" in capsys.readouterr().err
