"""Shared fixtures: a micro model and the engine's tokenizer."""

import torch

from coa_engine.model import Transformer, preset_config
from coa_engine.tokenizer import ByteTokenizer, default_tags

TOKENIZER = ByteTokenizer(default_tags())


def micro_model(seed: int = 0, max_seq_len: int = 256) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(preset_config("micro", TOKENIZER.vocab_size, max_seq_len)).eval()
