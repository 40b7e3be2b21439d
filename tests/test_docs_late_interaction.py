"""docs/late-interaction.md for a newcomer (issue 57): it says which extra ColBERT training needs, and how to make
the ``runs/colbert-minilm`` folder it names (nobody has it otherwise)."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "late-interaction.md"


def test_training_a_colbert_names_the_train_extra():
    text = DOC.read_text(encoding="utf-8")
    assert 'pip install "haystack-mvr[train]"' in text
    assert "No module named 'datasets'" in text  # the error a reader without it meets


def test_the_folder_the_docs_use_is_made_by_a_command_before_it_is_used():
    text = DOC.read_text(encoding="utf-8")
    made = [m.start() for m in re.finditer(r"--output-dir runs/colbert-minilm|\.save\(\"runs/colbert-minilm\"\)", text)]
    used = [m.start() for m in re.finditer(r'model="runs/colbert-minilm"', text)]
    assert made and used and min(made) < min(used)
