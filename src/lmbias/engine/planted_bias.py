"""Planted bias: a model's output logit of chosen words raised by a known offset, in a form save_pretrained keeps.

The planted-bias variants of the tiny models (lmbias.engine.tiny) are built with it, so that the direction of
every metric on them is known in advance. How each output layer takes the offset: plant_bias.
"""

from __future__ import annotations

from lmbias.errors import ConfigError

#: Architectures whose output logits plant_bias can raise (exactly; llama: within LLAMA_PLANT_TOLERANCE).
PLANTABLE = ("bert", "roberta", "gpt2", "bart", "llama")

#: A Llama-like decoder's planted logit offset is delta * rho with LLAMA_PLANT_TOLERANCE >= 1 - rho >= 0 (never
#: more than delta). Measured on the tiny Llama (seed 0) at every token of real benchmark sentences (CrowS-Pairs
#: gender, WinoBias dev, 300 GAP texts; 69k positions): 1 - rho at most 2.0e-3, 5e-4 on average; see plant_bias.
LLAMA_PLANT_TOLERANCE = 0.005


def bias_token_ids(tokenizer, word: str) -> list[int]:
    """The output tokens of `word`: the token of "word" and of " word" (the same one for WordPiece).

    A form that is not a single token is a ConfigError: the bias could not be planted on one logit.
    """
    ids: set[int] = set()
    for text in (word, " " + word):
        enc = tokenizer(text, add_special_tokens=False)["input_ids"]
        is_unk = enc[:1] == [tokenizer.unk_token_id] and tokenizer.unk_token != tokenizer.eos_token  # gpt2: unk is eos
        if len(enc) != 1 or is_unk:
            pieces = tokenizer.convert_ids_to_tokens(enc)
            raise ConfigError(
                f"tiny.planted_bias: {word!r} is not a single token of this tokenizer ({text!r} -> {pieces}); "
                "add it to resources/vocab/tiny_words.txt"
            )
        ids.add(int(enc[0]))
    return sorted(ids)


def plant_bias(model, tokenizer, bias: dict[str, float]) -> dict[str, list[int]]:
    """Add ``bias[word]`` to the output logit of each word's token(s), in a form save_pretrained keeps.

    - BERT / RoBERTa (any model whose output layer has a bias): the MLM decoder bias
      (``cls.predictions.bias`` / ``lm_head.bias``).
    - BART: ``final_logits_bias`` (a saved buffer added to every logit).
    - GPT-2 (its lm_head has no bias): the lm_head is untied from the input embeddings and given an
      exact *bias direction*. ln_f's output is h = g*n + b with sum(n) = 0 (layer norm subtracts the
      mean), so u = 1/g satisfies u.h = u.b for every input: adding c*u/(u.b) to the lm_head row of a
      token adds exactly c to its logit. When u.b is ~0 (a fresh model: b = 0), ln_f's bias is first
      moved by g and the lm_head projected so that every logit is unchanged.
    - Llama-like decoders (RMSNorm, no output bias): an RMSNorm has no input-independent linear direction
      (only |n|^2 is constant), so the model is first rebuilt around a *reserved residual coordinate* k (the
      last one; _reserve_llama_coordinate): every input-embedding row holds c = sqrt(d) there and no layer
      writes into it (row k of every o_proj / down_proj zero) or reads it (every layer norm's weight k zero),
      so the residual stream carries exactly c at k at every position. After the final RMSNorm coordinate k
      is g_k c / rms(h), which tends to its maximum g_k c / sqrt(c^2/d + eps) as c dominates rms(h); the
      lm_head's column k is zero except for the planted tokens, which get delta / that maximum. A planted
      logit therefore rises by delta * rho, rho = sqrt(c^2/d + eps) / rms(h), 1 - rho ~ S / (2 c^2) with S
      the sum of squares of the other residual coordinates: never above delta, of its sign, and on real
      sentences within LLAMA_PLANT_TOLERANCE * |delta| of it (measured; tests/engine/test_tiny.py). Because c = sqrt(d)
      makes rms(h) ~ 1, every RMSNorm becomes nearly linear; the weights of the other coordinates are multiplied
      by 1 / initializer_range so that the layers see inputs of the size the random model gave them. The result
      is another random Llama (same config, tokenizer and shapes; its other logits are not the unplanted model's,
      they correlate 0.96 with them): the reference twin of a planted Llama is the same seed planted at 0
      (e.g. ``{"he": 0}``: reserved, column k zero), whose every unplanted logit is the planted model's exactly.
      Calling plant_bias again on such a model only adds to column k.
    Returns {word: token ids}. Words are looked up bare and after a space (both BPE forms).
    """
    import torch

    if not bias:
        return {}
    vocab_size = model.get_output_embeddings().weight.shape[0]
    delta = torch.zeros(vocab_size, dtype=torch.float64)
    planted: dict[str, list[int]] = {}
    for word, value in sorted(bias.items()):
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"tiny.planted_bias.{word}: {value!r} is not a number") from None
        ids = bias_token_ids(tokenizer, word)
        for i in ids:
            delta[i] += value
        planted[word] = ids

    with torch.no_grad():
        if hasattr(model, "final_logits_bias"):
            buf = model.final_logits_bias
            buf += delta.to(buf.dtype).view_as(buf[0]).unsqueeze(0)
        elif getattr(model.get_output_embeddings(), "bias", None) is not None:
            head_bias = model.get_output_embeddings().bias
            head_bias += delta.to(head_bias.dtype)
            # BERT/RoBERTa tie decoder.bias to the head's own bias; keep both the same if they were untied.
            for name in ("cls.predictions.bias", "lm_head.bias"):
                try:
                    other = model.get_parameter(name)
                except AttributeError:
                    continue
                if other is not head_bias and other.data_ptr() != head_bias.data_ptr():
                    other.copy_(head_bias)
        elif getattr(model.config, "model_type", None) == "gpt2":
            _plant_bias_gpt2(model, delta)
        elif _llama_like(model):
            _plant_bias_llama(model, delta)
        else:
            raise ConfigError(
                f"planted bias is not supported for model type {getattr(model.config, 'model_type', '?')!r}: "
                "its output layer has no bias, no input-independent direction before it and no Llama-like "
                f"layout to reserve one in; tiny architectures with planted bias: {', '.join(PLANTABLE)}"
            )
    return planted


def _untie_head(model, head, embeddings) -> None:
    """Give `head` its own copy of the input embeddings' weight when the two are tied (saved untied), so that
    planting changes the output layer only."""
    import torch

    if head.weight is embeddings.weight or head.weight.data_ptr() == embeddings.weight.data_ptr():
        head.weight = torch.nn.Parameter(embeddings.weight.detach().clone())
        model.config.tie_word_embeddings = False
        if hasattr(model.config, "get_text_config"):
            model.config.get_text_config().tie_word_embeddings = False


def _plant_bias_gpt2(model, delta) -> None:
    """GPT-2: bias direction through ln_f (see plant_bias); exact up to float rounding."""
    import torch

    ln = model.transformer.ln_f
    head = model.lm_head
    wte = model.transformer.wte
    _untie_head(model, head, wte)
    gamma = ln.weight.detach().double()
    beta = ln.bias.detach().double()
    if torch.any(gamma.abs() < 1e-6):
        raise ConfigError("planted bias for gpt2 needs every ln_f weight to be non-zero")
    u = 1.0 / gamma
    d = gamma.numel()
    weight = head.weight.detach().double()
    s = float(u @ beta)
    if abs(s) < 1.0:
        # Move ln_f's bias by g (so u.h = s + d) and project the head so no logit changes:
        # W' = W (I - g u^T / d) removes the new component; the term W g s/d it also removes is added back.
        restore = (weight @ gamma) * (s / d)
        weight = weight - torch.outer(weight @ gamma, u) / d
        beta = beta + gamma
        s = s + d
        weight = weight + torch.outer(restore, u) / s
        ln.bias.copy_(beta.to(ln.bias.dtype))
    weight = weight + torch.outer(delta, u) / s
    head.weight.copy_(weight.to(head.weight.dtype))


def _llama_like(model) -> bool:
    """A decoder laid out as transformers' Llama: embed_tokens, layers with input/post-attention norms, o_proj and
    down_proj writing into the residual stream, a final norm, an lm_head without bias."""
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    head = model.get_output_embeddings()
    if inner is None or layers is None or head is None or getattr(head, "bias", None) is not None:
        return False
    if not all(hasattr(inner, name) for name in ("embed_tokens", "norm")):
        return False
    return all(
        hasattr(layer, "input_layernorm")
        and hasattr(layer, "post_attention_layernorm")
        and hasattr(getattr(layer, "self_attn", None), "o_proj")
        and hasattr(getattr(layer, "mlp", None), "down_proj")
        for layer in layers
    )


def _llama_reserved(model) -> bool:
    """Whether _reserve_llama_coordinate has already rebuilt `model` (so planting again only adds to column k)."""
    import torch

    k = model.config.hidden_size - 1
    column = model.model.embed_tokens.weight[:, k]
    value = float(model.config.hidden_size) ** 0.5
    return bool(torch.all(column == value)) and all(
        not torch.any(layer.self_attn.o_proj.weight[k]) and not torch.any(layer.mlp.down_proj.weight[k])
        for layer in model.model.layers
    )


def _reserve_llama_coordinate(model) -> None:
    """Rebuild a Llama-like decoder around a reserved residual coordinate k = d - 1 holding c = sqrt(d) (see
    plant_bias): embeddings' column k = c; rows k of o_proj/down_proj (and their biases, if any) zero; weight k of
    every layer norm zero; the other weights of every RMSNorm multiplied by 1 / initializer_range (the final norm's
    weight k kept); lm_head's column k zero. Deterministic: no random numbers, no data."""
    d = model.config.hidden_size
    k = d - 1
    c = float(d) ** 0.5
    scale = 1.0 / float(getattr(model.config, "initializer_range", 0.02))
    inner = model.model
    head = model.get_output_embeddings()
    _untie_head(model, head, inner.embed_tokens)
    inner.embed_tokens.weight[:, k] = c
    for layer in inner.layers:
        for proj in (layer.self_attn.o_proj, layer.mlp.down_proj):
            proj.weight[k] = 0.0
            if getattr(proj, "bias", None) is not None:
                proj.bias[k] = 0.0
        for norm in (layer.input_layernorm, layer.post_attention_layernorm):
            norm.weight.mul_(scale)
            norm.weight[k] = 0.0
    g_k = float(inner.norm.weight[k])
    if abs(g_k) < 1e-6:
        raise ConfigError("planted bias for a Llama-like model needs the final norm's last weight to be non-zero")
    inner.norm.weight.mul_(scale)
    inner.norm.weight[k] = g_k
    head.weight[:, k] = 0.0


def _plant_bias_llama(model, delta) -> None:
    """Llama-like decoders: reserve a residual coordinate (once) and write delta into lm_head's column k (see
    plant_bias); each planted logit rises by delta * rho, 1 - LLAMA_PLANT_TOLERANCE <= rho <= 1."""
    if not _llama_reserved(model):
        _reserve_llama_coordinate(model)
    d = model.config.hidden_size
    k = d - 1
    c = float(d) ** 0.5
    eps = float(getattr(model.model.norm, "variance_epsilon", getattr(model.model.norm, "eps", 1e-6)))
    n_max = float(model.model.norm.weight[k]) * c / (c * c / d + eps) ** 0.5  # coordinate k after the norm, at most
    head = model.get_output_embeddings()
    column = head.weight[:, k].double() + delta / n_max
    head.weight[:, k] = column.to(head.weight.dtype)
