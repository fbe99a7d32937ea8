"""A tiny GPT-2 whose next token is a known function of the current token alone (a lookup table), so that what it
generates from any prompt is known in advance.

Built from lmbias's tiny GPT-2 (lmbias.engine.tiny, its tokenizer and shapes), then rewritten: every block's
output projections (attention and MLP c_proj) and the position embeddings are zero, so the residual stream at a
position is the embedding of its token alone; the input embeddings are mutually orthogonal ±1 vectors (rows of a
Hadamard matrix: mean 0, variance 1, so the final layer norm leaves them as they are): one shared by every
token, one of its own for each token of `table`'s keys (both BPE forms, "he" and " he"); the lm_head (untied)
is zero but for the output tokens (the " word" form), each the embedding of the input it answers, times `scale`.
So after token x the logits are scale * 64 for table[x]'s token (or `default`'s, for any other x) and 0 for every
other token: greedy decoding emits " table[x]" after x and " default" after anything else. `uniform`: the
default output is several tokens of equal logit instead of one (a distribution independent of the prompt, for
sampling).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.planted_bias import bias_token_ids
from lmbias.engine.tiny import build_tiny_model


def _hadamard(n: int) -> np.ndarray:
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h


def _space_form(tokenizer, word: str) -> int:
    (token,) = tokenizer(" " + word, add_special_tokens=False)["input_ids"]
    return token


def lookup_gpt2(folder: Path, table: dict[str, str], default: str = "the", uniform: tuple[str, ...] = (), scale=10.0):
    """(model, tokenizer) of the lookup GPT-2 (module docstring), built into `folder`."""
    path = build_tiny_model("gpt2", folder, seed=0)
    model, tokenizer = load_model(model_spec("lookup", {"path": str(path), "family": "clm", "revision": "local"}))
    d = model.config.n_embd
    rows = torch.tensor(_hadamard(d)[1:], dtype=torch.float32)  # row 0 (all ones) has mean 1: left out
    assert len(table) + 1 <= rows.shape[0]
    with torch.no_grad():
        for block in model.transformer.h:
            for proj in (block.attn.c_proj, block.mlp.c_proj):
                proj.weight.zero_()
                proj.bias.zero_()
        model.transformer.wpe.weight.zero_()
        model.transformer.ln_f.weight.fill_(1.0)
        model.transformer.ln_f.bias.zero_()
        wte = torch.empty_like(model.transformer.wte.weight)
        wte[:] = rows[0]
        head = torch.zeros_like(model.transformer.wte.weight)
        for k, (word, answer) in enumerate(sorted(table.items()), start=1):
            for token in bias_token_ids(tokenizer, word):
                wte[token] = rows[k]
            head[_space_form(tokenizer, answer)] += scale * rows[k]
        for word in uniform or (default,):
            head[_space_form(tokenizer, word)] += scale * rows[0]
        model.transformer.wte.weight.copy_(wte)
        model.lm_head.weight = torch.nn.Parameter(head)
    model.config.tie_word_embeddings = False
    model.eval()
    return model, tokenizer
