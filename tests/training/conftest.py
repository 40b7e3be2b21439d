"""Fixtures of the training tests: the shared squad-mv data and a tiny backbone that learns in a few steps."""

from pathlib import Path

import pytest
import torch


@pytest.fixture(scope="session")
def squad_mv_dir() -> Path:
    path = Path(__file__).resolve().parents[3] / "shared" / "data" / "squad-mv"
    if not (path / "train.jsonl").is_file():
        pytest.skip("the shared squad-mv data is not available")
    return path


@pytest.fixture(scope="session")
def trainable_backbone(tmp_path_factory) -> Path:
    """
    The tiny 2-layer, 32-wide random BERT of ``tiny_backbone``, initialised with std 0.2 and without dropout.

    With the default std 0.02 a random BERT is nearly the identity: each viewer's output is its own token
    embedding, every document scores alike, and a dozen steps cannot show learning. This one learns within a few.
    """
    from transformers import BertModel

    from tests.conftest import minilm_tokenizer, tiny_bert_config

    tokenizer = minilm_tokenizer()
    torch.manual_seed(0)
    config = tiny_bert_config(
        tokenizer,
        max_position_embeddings=128,
        initializer_range=0.2,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    directory = tmp_path_factory.mktemp("trainable-bert")
    BertModel(config, add_pooling_layer=False).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
