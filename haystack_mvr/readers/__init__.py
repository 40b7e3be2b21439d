"""
The readers' wing: everything that turns retrieved context into an answer, from prompt to training.

- ``base_model``: where the generative reader's base comes from (standard library only);
- ``generative_prompt``: the generative reader's prompt, one for training and serving (jinja2 only);
- ``generative_model``: loading, merging and running the generative reader (torch and transformers, no haystack),
  with :func:`~haystack_mvr.readers.generative_model.generate_answers` its batch path and
  :func:`~haystack_mvr.readers.generative_model.read_answer` the same decoding for one question, grounded and scored;
  its passages are cut to the prompt's budget by ``haystack_mvr.token_budget``;
- ``answer_span``: snapping a generated answer to the span of the passages that matches it best (standard library
  only), so that every answer is text the reader read;
- ``shipped``: the reader that ships inside this package and the local folder it is built into;
- ``generative_reader``: ``GenerativeReader``, the Haystack component that answers with it;
  ``generative_pipeline``: ``generative_reader_pipeline`` (that component in a ``Pipeline``) and
  ``generative_prompt_builder`` (the same prompt for any chat generator);
- ``fusion_in_decoder_model``: Fusion-in-Decoder encoding, fusion and decoding (torch and transformers);
  ``fusion_in_decoder_reader``: ``FusionInDecoderReader``, its Haystack component;
- ``training``: training the extractive, Fusion-in-Decoder and generative readers (never imports haystack).

Pipelines import the components from ``haystack_mvr.components.readers``, and reader training from
``haystack_mvr.readers.training``. A pipeline saved under the FiD reader's path before it moved here still loads
(``haystack_mvr.moved_paths``). Nothing is imported here, so ``haystack-mvr train-reader`` checks its ``--model``
before torch loads.
"""
