"""A checkpoint's multi_view_config.json is refused at load, naming the field, when a value has the wrong type or
does not fit the backbone (never read as something else, never a TypeError or an error deep in torch)."""

from __future__ import annotations

import json

import pytest

from haystack_mvr.modeling.config import CONFIG_NAME, MultiViewConfig
from tests.conftest import save_tiny_checkpoint


@pytest.fixture(scope="module")
def mvr_checkpoint(tiny_backbone, tmp_path_factory):
    return save_tiny_checkpoint(tiny_backbone, tmp_path_factory.mktemp("mvr"), "mvr", 2)


def edited(checkpoint, tmp_path, **changes):
    """A copy of ``checkpoint`` whose config has ``changes`` (a value ``...`` removes the key)."""
    import shutil

    folder = tmp_path / "edited"
    shutil.copytree(checkpoint, folder)
    config = json.loads((folder / CONFIG_NAME).read_text())
    config.update(changes)
    (folder / CONFIG_NAME).write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tied", "false"),
        ("normalize", "yes"),
        ("normalize", 1),
        ("format_version", "1"),
        ("format_version", True),
        ("query_max_length", "64"),
        ("doc_max_length", 64.0),
        ("num_views", True),
        ("viewer_position", "0"),
        ("base_model", 3),
        ("snippet_tokens", "64"),
        ("max_views", None),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_naming_the_field(mvr_checkpoint, tmp_path, field, value):
    folder = edited(mvr_checkpoint, tmp_path, **{field: value})
    with pytest.raises(ValueError, match=field) as error:
        MultiViewConfig.load(folder)
    assert str(folder / CONFIG_NAME) in str(error.value)


@pytest.mark.parametrize("content", ["[]", '["mode", "mvr"]', '"mvr"', "3", "null"])
def test_a_config_that_is_no_json_object_is_refused(tmp_path, content):
    (tmp_path / CONFIG_NAME).write_text(content)
    with pytest.raises(ValueError, match="JSON object") as error:
        MultiViewConfig.load(tmp_path)
    assert str(tmp_path / CONFIG_NAME) in str(error.value)


def test_constructing_a_config_checks_types_too():
    with pytest.raises(ValueError, match="tied"):
        MultiViewConfig(tied="false")
    with pytest.raises(ValueError, match="normalize"):
        MultiViewConfig(mode="snippet", normalize="yes")
    assert MultiViewConfig(mode="snippet", snippet_tokens=None).snippet_tokens is None


@pytest.mark.parametrize("field", ["doc_max_length", "query_max_length"])
def test_a_length_past_the_backbone_positions_is_refused_at_load(mvr_checkpoint, tmp_path, field):
    positions = json.loads((mvr_checkpoint / "config.json").read_text())["max_position_embeddings"]
    folder = edited(mvr_checkpoint, tmp_path, **{field: 100_000})
    with pytest.raises(ValueError, match=f"{field}.*100000.*{positions}"):
        MultiViewConfig.load(folder)

    from haystack_mvr.modeling.st_encoder import open_encoder

    with pytest.raises(ValueError, match=field):
        open_encoder(folder, "cpu")


def test_an_untied_checkpoint_is_checked_against_its_backbones(tiny_backbone, tmp_path):
    from tests.conftest import save_tiny_checkpoint

    path = save_tiny_checkpoint(tiny_backbone, tmp_path / "untied", "mvr", 2, tied=False)
    assert MultiViewConfig.load(path).tied is False
    folder = edited(path, tmp_path, doc_max_length=100_000)
    with pytest.raises(ValueError, match="doc_max_length"):
        MultiViewConfig.load(folder)


def test_an_older_snippet_checkpoint_is_checked_before_the_model_loads(tiny_backbone, tmp_path):
    import shutil

    from haystack_mvr.components.embedders import MultiViewDocumentEmbedder

    folder = tmp_path / "snippet"
    shutil.copytree(tiny_backbone, folder)
    MultiViewConfig(mode="snippet", num_views=2, doc_max_length=100_000).save(folder)
    with pytest.raises(ValueError, match="doc_max_length"):
        MultiViewDocumentEmbedder(model=folder, progress_bar=False).warm_up()


def test_a_valid_checkpoint_still_loads(mvr_checkpoint):
    config = MultiViewConfig.load(mvr_checkpoint)
    assert (config.mode, config.num_views, config.doc_max_length, config.tied) == ("mvr", 2, 64, True)
