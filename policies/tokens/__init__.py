"""Actions as tokens of a language model's vocabulary (:mod:`policies.tokens.action_tokenizer`)."""

from policies.tokens.action_tokenizer import ID_PLACEMENTS, ActionTokenizer, decode_actions, encode_actions

__all__ = ["ID_PLACEMENTS", "ActionTokenizer", "decode_actions", "encode_actions"]
