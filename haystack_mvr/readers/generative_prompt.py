"""
The prompt of the generative reader, one for training and serving (jinja2 and the standard library only, so that
training, which never imports haystack, and the Haystack components both import it).

``GENERATIVE_READER_TEMPLATE`` is the user message: the question and the numbered passages. Training renders it
with :func:`reader_messages`; Haystack renders the very same text with
``ChatPromptBuilder(template=[ChatMessage.from_user(GENERATIVE_READER_TEMPLATE)])`` (both use jinja2's sandboxed
environment with its default settings). The tokenizer's chat template then wraps it as usual, its default system
message included (SmolLM2 adds one when none is given), in training and serving alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "ANSWER_PATTERN",
    "GENERATIVE_READER_TEMPLATE",
    "NO_ANSWER",
    "is_no_answer",
    "reader_messages",
    "reader_prompt",
]

GENERATIVE_READER_TEMPLATE = """\
Answer the question using only the context. Reply with the short answer alone, copied word for word from the \
context, without a full sentence.

Context:
{% for document in documents %}
[{{ loop.index }}] {{ document.content }}
{% endfor %}
Question: {{ question }}
Answer:"""

# the answer a reader trained to abstain gives when its context does not hold the answer (training's target for
# such contexts; the reader returns no answer when it generates it)
NO_ANSWER = "unanswerable"

# what AnswerBuilder(pattern=...) keeps of a chat generator's reply: the reply without leading and trailing
# whitespace, as the reader's generate_answers strips its answers
ANSWER_PATTERN = r"(?s)\S.*\S|\S"


def is_no_answer(generated: str) -> bool:
    """Whether a generated answer is :data:`NO_ANSWER` (case, surrounding space and a final period aside)."""
    return generated.strip().rstrip(".").strip().lower() == NO_ANSWER


@dataclass(frozen=True)
class _Passage:
    """What the template reads of a Haystack ``Document``: its ``content``."""

    content: str


@lru_cache(maxsize=1)
def _template():
    from jinja2.sandbox import SandboxedEnvironment

    return SandboxedEnvironment().from_string(GENERATIVE_READER_TEMPLATE)


def reader_prompt(question: str, passages: list[str]) -> str:
    """The user message ``GENERATIVE_READER_TEMPLATE`` renders for ``question`` and ``passages`` (numbered from 1)."""
    return _template().render(question=question, documents=[_Passage(p) for p in passages])


def reader_messages(question: str, passages: list[str]) -> list[dict[str, str]]:
    """The chat the reader sees, for ``tokenizer.apply_chat_template``: one user message (no system message)."""
    return [{"role": "user", "content": reader_prompt(question, passages)}]
