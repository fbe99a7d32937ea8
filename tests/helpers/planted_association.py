"""Tiny models with a planted *association* (an attribute token in the context moves the target prediction
towards the male or the female targets), for the logprob-score and DA-Gender direction tests; see
tests/benchmarks/test_logprob.py for why a planted *output* bias cannot move those scores."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import torch

from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.scoring import word_token_ids

FAMILY = {"bert": "mlm", "bart": "seq2seq", "gpt2": "clm"}
MALE_WORDS = ["he", "He", "boy", "man", "brother", "son", "husband", "boyfriend", "father", "dad", "uncle"]
FEMALE_WORDS = ["she", "She", "girl", "woman", "sister", "daughter", "wife", "girlfriend", "mother", "mom", "aunt"]


def load_dir(path: Path, arch: str):
    """(model, tokenizer) of a tiny model folder of architecture `arch` (bert, bart, gpt2)."""
    spec = model_spec(f"tiny-{arch}", {"path": str(path), "family": FAMILY[arch], "revision": "local"})
    return load_model(spec)


def marker_signs(tokenizer, items: pa.Table, sign_of) -> dict[int, float]:
    """Token ids to mark: those of attributes, never of a template, determiner or special token (the ids of
    every TAM context are excluded), and never of attributes of both signs. sign_of(row) -> +1 / -1."""
    mask = tokenizer.mask_token
    excluded: set[int] = set()
    for text in set(items.column("tam_sent").to_pylist()):
        excluded.update(tokenizer(text.replace("[MASK]", mask))["input_ids"])
    signs: dict[int, set[float]] = {}
    for row in items.to_pylist():
        for i in attribute_ids(tokenizer, row):
            if i not in excluded:
                signs.setdefault(i, set()).add(float(sign_of(row)))
    return {i: s.pop() for i, s in signs.items() if len(s) == 1}


def attribute_ids(tokenizer, row) -> list[int]:
    """Token ids of the row's attribute word as it stands in its TM sentence."""
    s = row["tm_sent"]
    return word_token_ids(
        tokenizer, s[row["attr_start"] : row["attr_end"]], after_space=s[row["attr_start"] - 1] == " "
    )


def plant_association(
    base_dir: Path,
    out_dir: Path,
    arch: str,
    markers: dict[int, float],
    c: float = 10.0,
    alpha: float = 1.0,
    seed: int = 0,
) -> Path:
    """A model whose target prediction moves towards the male targets when a +marked token is in the context
    (towards the female targets for a -marked one), and is otherwise blind to the context. Exact, by design:

    * zero-mean orthonormal directions e (the marker) and g (the gender direction); every token embedding is
      projected orthogonal to both, then marked tokens get + alpha * sign * e, male target words + beta * g and
      female target words - beta * g (beta > max |D_perp| / 2 over the pairs, D = E_male - E_female);
    * position and token-type embeddings are zeroed and every LayerNorm is the identity map (gain 1, bias 0):
      an input token x_j = LN(E_j) is orthogonal to e and g unless it is marked or a target word;
    * every sub-layer is switched off (output projections zero) except one uniform attention (queries and keys
      zero) in the last layer -- BERT's self-attention, BART's decoder cross-attention over the encoder -- that
      reads e and writes c * g: at the prediction position the hidden state becomes h = LN(x_i + t g) with
      t = c * mean_j (e . x_j), of the sign of the attribute's marker, and t = 0 when the attribute is masked;
    * the output layer is linear in h (BERT's head transform becomes the identity, BART has none), tied to E.

    x_i is the mask embedding (BERT) or the previous decoder token (BART), never a target word, so x_i is
    orthogonal to g. For a pair (m, f) in one context the logit difference is D . h(t) and
    D . h(t) - D . h(0) = (2 beta t - D_perp . x_i (N - 1)) / N(t) with N = |x_i + t g| / |x_i| >= 1; since
    N - 1 <= |t| / |x_i| and |D_perp . x_i| <= |D_perp| |x_i|, its sign is the sign of t when 2 beta > |D_perp|.
    That difference is exactly asso(m, a) - asso(f, a) (the normalisers cancel in one context). So: a +marked
    attribute gives every pair asso(male) > asso(female), a -marked one the reverse, an unmarked one equality.
    """
    shutil.copytree(base_dir, out_dir)
    model, tokenizer = load_dir(out_dir, arch)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        if arch == "bert":
            emb = model.bert.embeddings
            E = emb.word_embeddings.weight
            d = E.shape[1]
        else:
            E = model.model.shared.weight
            d = E.shape[1]
        basis = torch.randn(d, 2, generator=gen, dtype=torch.float64)
        basis -= basis.mean(0, keepdim=True)
        q, _ = torch.linalg.qr(basis)
        e, g = q[:, 0], q[:, 1]
        W = E.detach().double()
        W = W - torch.outer(W @ e, e) - torch.outer(W @ g, g)
        for i, sign in markers.items():
            W[i] += alpha * sign * e
        male = sorted(
            {t for w in MALE_WORDS for t in word_token_ids(tokenizer, w, after_space=True)}
            | {t for w in MALE_WORDS for t in word_token_ids(tokenizer, w, after_space=False)}
        )
        female = sorted(
            {t for w in FEMALE_WORDS for t in word_token_ids(tokenizer, w, after_space=True)}
            | {t for w in FEMALE_WORDS for t in word_token_ids(tokenizer, w, after_space=False)}
        )
        d_perp = max(float(torch.linalg.norm(W[m] - W[f])) for m in male for f in female)
        beta = 1.0 + d_perp
        for i in male:
            W[i] += beta * g
        for i in female:
            W[i] -= beta * g
        E.copy_(W.to(E.dtype))

        def identity_ln(ln):
            ln.weight.fill_(1.0)
            ln.bias.zero_()

        def zero(linear):
            linear.weight.zero_()
            if linear.bias is not None:
                linear.bias.zero_()

        def read_e_write_g(value, out):
            zero(value)
            value.weight[0] = e.to(value.weight.dtype)
            zero(out)
            out.weight[:, 0] = (c * g).to(out.weight.dtype)

        if arch == "bert":
            emb.position_embeddings.weight.zero_()
            emb.token_type_embeddings.weight.zero_()
            identity_ln(emb.LayerNorm)
            layers = model.bert.encoder.layer
            for layer in layers:
                zero(layer.attention.output.dense)
                zero(layer.output.dense)
                identity_ln(layer.attention.output.LayerNorm)
                identity_ln(layer.output.LayerNorm)
            last = layers[-1].attention
            zero(last.self.query)
            zero(last.self.key)
            read_e_write_g(last.self.value, last.output.dense)
            head = model.cls.predictions.transform
            head.dense.weight.copy_(torch.eye(d))
            head.dense.bias.zero_()
            identity_ln(head.LayerNorm)
            model.cls.predictions.bias.zero_()
            model.config.hidden_act = "linear"
        else:
            m = model.model
            for part in (m.encoder, m.decoder):
                part.embed_positions.weight.zero_()
                identity_ln(part.layernorm_embedding)
            for layer in m.encoder.layers:
                zero(layer.self_attn.out_proj)
                zero(layer.fc2)
                identity_ln(layer.self_attn_layer_norm)
                identity_ln(layer.final_layer_norm)
            for layer in m.decoder.layers:
                zero(layer.self_attn.out_proj)
                zero(layer.encoder_attn.out_proj)
                zero(layer.fc2)
                for ln in (layer.self_attn_layer_norm, layer.encoder_attn_layer_norm, layer.final_layer_norm):
                    identity_ln(ln)
            last = m.decoder.layers[-1].encoder_attn
            zero(last.q_proj)
            zero(last.k_proj)
            read_e_write_g(last.v_proj, last.out_proj)
            model.final_logits_bias.zero_()
    model.save_pretrained(out_dir, safe_serialization=True)
    return out_dir
