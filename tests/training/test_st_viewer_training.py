"""MVR / CAMVR train through sentence-transformers: viewer modules from load_model, CAMVR's answer view, the save."""

import numpy as np
import pytest
import torch

pytest.importorskip("datasets")
st = pytest.importorskip("sentence_transformers", minversion="6")

from haystack import Document  # noqa: E402

from haystack_mvr.datasets.squad_mv import Passage  # noqa: E402
from haystack_mvr.training.arguments import TrainingArguments  # noqa: E402
from haystack_mvr.training.data import TrainingExample  # noqa: E402
from haystack_mvr.training.st_dataset import build_st_dataset  # noqa: E402
from haystack_mvr.training.st_training import build_trainer, load_model, model_mode, snippet_layout  # noqa: E402
from haystack_mvr.views import document_views  # noqa: E402
from tests.training.conftest import toy_examples  # noqa: E402

WORDS = ["cat", "dog", "horse", "river", "mountain", "piano", "guitar", "apple"]
TEXTS = ["The cat is here. Nothing else happens. A cat again.", "A rocket flies.", "One. Two. Three. Four."]


def viewer_examples() -> list[TrainingExample]:
    return toy_examples(WORDS, "Nothing else happens. The {w} is here. A {w} again.", (1, 3))


def arguments(backbone, tmp_path, **options) -> TrainingArguments:
    settings = {
        "model": str(backbone),
        "data_dir": "unused",
        "output_dir": str(tmp_path / "out"),
        "num_views": 3,
        "batch_size": 8,
        "lr": 3e-3,
        "warmup_ratio": 0.0,
        "log_every": 1,
        "progress_bar": False,
        "num_bm25_negatives": 0,
        "doc_max_length": 32,
        "query_max_length": 12,
        "device": "cpu",
        "temperature": 1.0,
        "save_total_limit": 0,
        **options,
    }
    return TrainingArguments(**settings)


def dataset_for(model):
    layout = snippet_layout(model)
    return build_st_dataset(
        viewer_examples(),
        num_negatives=1,
        num_snippets=layout[0] if layout else None,
        first_snippet_view=layout[1] if layout else 1,
    )


def eval_loss(trainer, dataset) -> float:
    batch = trainer.data_collator([dataset[i] for i in range(len(dataset))])
    trainer.model.eval()
    with torch.no_grad():
        value = trainer.compute_loss(trainer.model, batch).item()
    trainer.model.train()
    return value


def viewer_rows(model) -> torch.Tensor:
    from haystack_mvr.modeling.encoder_inspection import document_modules
    from haystack_mvr.modeling.inputs import QUERY_VIEWER, viewer_tokens

    transformer = document_modules(model)[0]
    ids = transformer.tokenizer.convert_tokens_to_ids([QUERY_VIEWER, *viewer_tokens(transformer.num_views)])
    return transformer.auto_model.get_input_embeddings().weight[ids].detach().clone()


@pytest.mark.parametrize(
    "options",
    [{"mode": "mvr"}, {"mode": "mvr", "viewer_position": 1}, {"mode": "camvr"}, {"mode": "camvr", "tied": False}],
    ids=["mvr", "mvr-position-1", "camvr", "camvr-untied"],
)
def test_viewer_modes_train_through_sentence_transformers(trainable_backbone, tmp_path, options):
    from haystack_mvr.modeling.encoder_inspection import document_modules
    from haystack_mvr.modeling.viewer_transformer import ViewerTransformer

    args = arguments(trainable_backbone, tmp_path, max_steps=10, **options)
    torch.manual_seed(0)
    model = load_model(args)
    transformer = document_modules(model)[0]
    assert isinstance(transformer, ViewerTransformer)
    assert (transformer.mode, transformer.num_views, transformer.viewer_position) == (
        options["mode"],
        3,
        options.get("viewer_position", 0),
    )
    assert ([type(m).__name__ for m in model] == ["Router"]) == (options.get("tied") is False)
    assert model_mode(model) == (options["mode"], 3)
    assert snippet_layout(model) == ((3, 0) if options["mode"] == "camvr" else None)
    dataset = dataset_for(model)
    assert ("answer_view" in dataset.column_names) == (options["mode"] == "camvr")
    trainer = build_trainer(model, args, dataset)
    assert type(trainer.loss).__name__ == (
        "MultiViewAnswerViewLoss" if options["mode"] == "camvr" else "MultiViewGlobalLocalLoss"
    )
    viewers = viewer_rows(model)
    before = eval_loss(trainer, dataset)
    trainer.train()
    after = eval_loss(trainer, dataset)
    assert after < before - 0.05, (before, after)
    assert not torch.allclose(viewers, viewer_rows(model))  # the viewer token embeddings learn


def test_the_camvr_answer_view_label_is_the_view_of_the_answers_snippet(trainable_backbone, tmp_path):
    model = load_model(arguments(trainable_backbone, tmp_path, mode="camvr"))
    text = "Warsaw is in Poland. The Vistula flows through it. Its old town was rebuilt."
    start = text.index("Vistula")
    example = TrainingExample("q", "which river?", Passage("p", "", text), ("Vistula",), start)
    label = build_st_dataset([example], num_negatives=0, num_snippets=3, first_snippet_view=0)["answer_view"][0]
    assert label == 1  # the second snippet's viewer, [VIE_2]: CAMVR has no whole-text view
    # the view the viewer modules give at that index is the one that holds the answer
    features = model.preprocess([text], task="document")
    lo, hi = features["mvr_spans"][0, label].tolist()
    assert lo <= start < hi and text[lo:hi] == "The Vistula flows through it."
    tokens = model[0].tokenizer.convert_ids_to_tokens(features["input_ids"][0].tolist())
    assert tokens[int(features["mvr_pooling"][0, label].argmax())] == "[VIE_2]"


@pytest.mark.parametrize("mode", ["mvr", "camvr"])
def test_the_trained_folder_loads_in_sentence_transformers_and_the_haystack_embedders(
    trainable_backbone, tmp_path, mode
):
    from haystack_mvr.components.embedders import MultiViewDocumentEmbedder

    args = arguments(trainable_backbone, tmp_path, mode=mode, max_steps=2)
    model = load_model(args)
    trainer = build_trainer(model, args, dataset_for(model))
    trainer.train()
    trainer.save_model(args.output_dir)
    model.eval()
    expected = [v.numpy() for v in model.encode_document(TEXTS)]

    loaded = st.MultiVectorEncoder(args.output_dir, device="cpu", trust_remote_code=True)
    assert model_mode(loaded) == (mode, 3)
    for a, b in zip(expected, loaded.encode_document(TEXTS), strict=True):
        np.testing.assert_allclose(a, b.numpy(), atol=1e-5)
    embedder = MultiViewDocumentEmbedder(model=args.output_dir, progress_bar=False)
    docs = embedder.run([Document(content=t) for t in TEXTS])["documents"]
    assert embedder.encoder.config.mode == mode
    for a, doc in zip(expected, docs, strict=True):
        np.testing.assert_allclose(a, document_views(doc), atol=1e-5)
    # training again from the folder keeps its modules; a different mode is refused
    assert model_mode(load_model(arguments(args.output_dir, tmp_path / "again"))) == (mode, 3)
    with pytest.raises(ValueError, match="mode"):
        load_model(arguments(args.output_dir, tmp_path / "again", mode="snippet"))


@pytest.mark.parametrize("embed_title", [False, True])
def test_answer_views_with_and_without_a_title_head(tiny_backbone, embed_title):
    """CAMVR's labels on the text the model sees (``title + separator + text`` when titles are embedded)."""
    from haystack_mvr.modeling.encoder_builders import viewer_encoder

    model = viewer_encoder(tiny_backbone, mode="camvr", views=4, doc_max_length=48)
    doc = Passage("d1", "Pets", "Cats purr softly. Dogs bark at night. Fish swim in tanks.")
    other = Passage("d2", "Cars", "Cars drive on roads. Trains run on rails.")
    examples = [
        TrainingExample("q1", "what barks?", doc, ("Dogs",), doc.text.index("bark")),
        TrainingExample("q2", "what swims?", doc, ("Fish",), doc.text.index("swim")),
        TrainingExample("q3", "what drives?", other, (), None),
    ]
    layout = snippet_layout(model)
    dataset = build_st_dataset(
        examples, num_negatives=0, num_snippets=layout[0], first_snippet_view=layout[1], embed_title=embed_title
    )
    assert dataset["answer_view"] == [1, 2, -1]
    text = dataset["positive"][0]
    assert text.startswith("Pets\n") == embed_title
    spans = model.preprocess([text], task="document")["mvr_spans"][0].tolist()
    assert "bark" in text[slice(*spans[1])] and "swim" in text[slice(*spans[2])]
