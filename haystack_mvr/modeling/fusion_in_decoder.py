"""
Moved to :mod:`haystack_mvr.readers.fusion_in_decoder_model` (the readers' wing); this module re-exports it so that
older imports keep working. ``generate_answers`` is the old name of ``generate_from_fused_states``.
"""

from haystack_mvr.readers.fusion_in_decoder_model import (
    answer_with_fusion_in_decoder,
    encode_passages,
    format_fid_input,
    fuse_passage_states,
    fused_encoder_outputs,
    generate_from_fused_states,
    sequence_log_probs,
)

generate_answers = generate_from_fused_states

__all__ = [
    "answer_with_fusion_in_decoder",
    "encode_passages",
    "format_fid_input",
    "fuse_passage_states",
    "fused_encoder_outputs",
    "generate_answers",
    "generate_from_fused_states",
    "sequence_log_probs",
]
