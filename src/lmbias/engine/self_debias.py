"""Self-Debias (Schick et al. 2021) as a model wrapper the scoring engine reads like any model.

A decoding-time method, nothing trained: the model also reads each input behind a debiasing prefix
("The following text discriminates against people because of their gender: "), and at every position
the regular distribution p is rescaled where the prefixed model p_prefixed gives a token more probability:

    delta(w) = max(p_prefixed(w) - p(w), 0)
    alpha(w) = max(exp(-decay_constant * delta(w)), epsilon)
    p_debiased(w) = alpha(w) * p(w) / sum_v alpha(v) * p(v)

(bias-bench's SelfDebiasingLogitsProcessor, one prefix; decay_constant 50 and epsilon 0.01 are its
defaults). A token the prefix does not make more likely keeps alpha = 1, so only tokens whose probability
rises under the prefix lose mass (relative to the rest).

How the prefixed input is built follows bias-bench (`MaskedLMWrapper.get_token_logits_self_debiasing`,
`GPT2Wrapper.compute_loss_self_debiasing`): the input's first token is replaced by the prefix tokens, the
sentence's own tokens follow unchanged, so position t of the input is position t + k - 1 of the prefixed
input (k prefix tokens):

* mlm: ``[CLS] s1 .. sn [SEP]`` -> ``tok("[CLS] " + prefix) s1 .. sn [SEP]`` (bias-bench tokenises the CLS
  token and the prefix together, without special tokens);
* clm: ``BOS s1 .. sn`` (the engine's BOS-conditioned input) -> ``tok(prefix) s1 .. sn``: the first sentence
  token is predicted after the prefix's last token, the regular one after BOS. With `scoring.clm_context:
  bias_bench` the engine reads s1 from the start token's pass (``BOS`` -> ``tok(prefix)``) and s2 .. sn from
  the sentence alone, ``s1 .. sn`` -> ``tok(prefix) s1 .. sn`` (`prepending_prefix`), which is how bias-bench's
  GPT2Wrapper.compute_loss_self_debiasing builds its inputs (less its two defects, docs/peers.md,
  "Reproducing the peers' numbers").
* clm with a tokenizer that puts a BOS in front of every text itself (Llama, Mistral, Gemma: ``<s>``,
  ``<|begin_of_text|>``, ``<bos>``; `adds_bos`): the model never read a text without it, so the BOS stays and
  the prefix follows it: ``BOS s1 .. sn`` -> ``BOS tok(prefix) s1 .. sn``, and the sentence alone ``s1 .. sn``
  -> ``BOS tok(prefix) s1 .. sn``. The tokens put in front are then ``BOS tok(prefix)`` (k + 1 of them), so
  the shift is k (k + 1 before the sentence alone). It is also what bias-bench's own code would do with such a
  tokenizer: it encodes its prefixes with the tokenizer's special tokens (batch_encode_plus). GPT-2, Pythia
  (GPT-NeoX), Qwen2 and OLMo-2 tokenizers add nothing to a text (their start token, ``<|endoftext|>``, is
  the document separator the engine puts first), so their inputs are bias-bench's, unchanged.

The wrapper's forward returns, as `logits`, the log of the rescaled, renormalised distribution (float64)
at every position, so every probability-based benchmark reads it through the engine unchanged. Hidden
states are not rescaled: embedding benchmarks (SEAT) do not apply, and asking for them is an error.
seq2seq (BART) is not defined (bias-bench has no encoder-decoder MLM variant; its T5 path only generates).
"""

from __future__ import annotations

import copy
import math
import numbers
from dataclasses import asdict, dataclass
from types import SimpleNamespace

from lmbias.engine.scoring import adds_bos
from lmbias.errors import ConfigError, DataError
from lmbias.lazy import lazy_module

torch = lazy_module("torch")

#: bias-bench's gender prefix (bias_bench/benchmark/crows/crows.py DEBIASING_PREFIXES["gender"]).
DEFAULT_PREFIX = "The following text discriminates against people because of their gender: "
DEFAULT_DECAY_CONSTANT = 50.0
DEFAULT_EPSILON = 0.01
#: Families Self-Debias is defined for.
FAMILIES = ("mlm", "clm")
#: Why embedding benchmarks are left out of a Self-Debias summary (the summary's left_out reason).
NOT_APPLICABLE_REASON = "Self-Debias rescales output probabilities; embedding benchmarks do not apply"


@dataclass(frozen=True)
class SelfDebiasSettings:
    """A method entry's Self-Debias options (config keys methods.<name>.prefix, decay_constant, epsilon)."""

    prefix: str = DEFAULT_PREFIX
    decay_constant: float = DEFAULT_DECAY_CONSTANT
    epsilon: float = DEFAULT_EPSILON

    @classmethod
    def from_entry(cls, entry: dict, key: str) -> SelfDebiasSettings:
        """Options of a method entry with defaults filled in; ConfigError naming `<key>.<option>`."""
        prefix = entry.get("prefix", DEFAULT_PREFIX)
        if not isinstance(prefix, str) or not prefix.strip():
            raise ConfigError(f"{key}.prefix: {prefix!r} is not a non-empty text (default {DEFAULT_PREFIX!r})")
        decay = _number(entry.get("decay_constant", DEFAULT_DECAY_CONSTANT), f"{key}.decay_constant")
        if decay <= 0:
            raise ConfigError(f"{key}.decay_constant: {decay!r} must be > 0 (bias-bench's lambda, default 50)")
        epsilon = _number(entry.get("epsilon", DEFAULT_EPSILON), f"{key}.epsilon")
        if not 0 < epsilon <= 1:
            raise ConfigError(
                f"{key}.epsilon: {epsilon!r} must be in (0, 1] (the smallest factor a probability is "
                "multiplied by; default 0.01)"
            )
        return cls(prefix=prefix, decay_constant=decay, epsilon=epsilon)

    def to_dict(self) -> dict:
        return asdict(self)


def _number(value, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise ConfigError(f"{key}: {value!r} is not a finite number")
    return float(value)


def rescaled_logprobs(regular_logits, prefixed_logits, decay_constant: float, epsilon: float):
    """log p_debiased over the last axis (float64), from the regular and the prefixed logits.

    Computed in log space: log(max(exp(-l d), e)) = max(-l d, log e), so probabilities far below float range
    stay finite; equal to bias-bench's probability-space computation."""
    log_regular = torch.log_softmax(regular_logits.double(), dim=-1)
    p_prefixed = torch.softmax(prefixed_logits.double(), dim=-1)
    delta = (p_prefixed - log_regular.exp()).clamp_min(0.0)
    log_alpha = (-decay_constant * delta).clamp_min(math.log(epsilon))
    scaled = log_regular + log_alpha
    return scaled - torch.logsumexp(scaled, dim=-1, keepdim=True)


def prefix_token_ids(tokenizer, family: str, prefix: str) -> list[int]:
    """The tokens that replace the input's first token (or, `prepending_prefix`, go before the input):
    tok("[CLS] " + prefix) for mlm, tok(prefix) for clm (no special tokens added, as bias-bench encodes them
    for BERT and GPT-2), and ``BOS tok(prefix)`` for clm where the tokenizer adds a BOS to every text itself
    (module docstring: the model never read a text without it)."""
    if family == "mlm":
        if tokenizer.cls_token is None:
            raise ConfigError(
                f"Self-Debias on a masked LM needs a tokenizer with a CLS token ({type(tokenizer).__name__} has none)"
            )
        text = " ".join([tokenizer.cls_token, prefix])
    elif family == "clm":
        text = prefix
    else:
        raise ConfigError(f"Self-Debias is defined for families {', '.join(FAMILIES)}, not {family!r}")
    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    if not ids:
        raise ConfigError(f"Self-Debias prefix {prefix!r} has no tokens")
    if family == "clm" and adds_bos(tokenizer):
        ids = [int(tokenizer.bos_token_id)] + ids
    return ids


def start_token_id(tokenizer, family: str) -> int:
    """The token every engine input starts with, which the prefix replaces: [CLS]/<s> (mlm), BOS or EOS (clm)."""
    if family == "mlm":
        return int(tokenizer.cls_token_id)
    return int(tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id)


class SelfDebiasingLM:
    """A masked or causal LM whose output is the Self-Debias distribution (module docstring).

    forward(input_ids, attention_mask, token_type_ids) runs the model on the input and on the prefixed
    input and returns an object whose `logits` are log p_debiased (float64) at every input position.
    Inputs are right-padded (the engine's layout): the prefixed input shifts every row by the same
    `added_positions()` (k - 1 for k prefix tokens in the start token's place).
    A plain object, not a torch Module, so that importing this module (the DAG build reads its settings)
    does not import torch.
    """

    def __init__(self, model, tokenizer, family: str, settings: SelfDebiasSettings):
        if family not in FAMILIES:
            raise ConfigError(f"Self-Debias is defined for families {', '.join(FAMILIES)}, not {family!r}")
        self.inner = model
        self.family = family
        self.settings = settings
        self.prefix_ids = prefix_token_ids(tokenizer, family, settings.prefix)
        self.start_id = start_token_id(tokenizer, family)
        self.lmbias_commit = getattr(model, "lmbias_commit", "")
        self.prepend = False  # True: the prefix goes before the whole input (prepending_prefix)

    def prepending_prefix(self) -> SelfDebiasingLM:
        """This wrapper for causal inputs without a start token: the prefix goes before the input instead of in
        its first token's place (position t of the input is position t + k of the prefixed input; t + k + 1
        where the tokenizer adds a BOS, which then leads the prefixed input: `prefix_token_ids`)."""
        if self.family != "clm":
            raise ConfigError(f"Self-Debias: a prefix before the whole input is defined for clm, not {self.family!r}")
        other = copy.copy(self)
        other.prepend = True
        return other

    def added_positions(self) -> int:
        """How many tokens longer the prefixed input is than the input (what a window must leave free of the
        model's positions): the prefix tokens (with a BOS-adding tokenizer's BOS in front), less the start token
        they replace unless prepending."""
        return len(self.prefix_ids) - (0 if self.prepend else 1)

    # What the engine and the jobs use of a model: parameters (its device), eval, to, calling it.
    def parameters(self):
        return self.inner.parameters()

    def eval(self):
        self.inner.eval()
        return self

    def to(self, *args, **kwargs):
        self.inner.to(*args, **kwargs)
        return self

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # The engine reads config (model_type, vocab size) like a plain model's; it never applies an LM head
    # itself (scoring.mlm_head checks `rescales_output`), since the rescaling needs whole distributions.
    rescales_output = True

    @property
    def config(self):
        return self.inner.config

    @property
    def base_model(self):
        raise ConfigError(NOT_APPLICABLE_REASON + " (hidden states are not rescaled)")

    def _max_positions(self) -> int | None:
        config = self.inner.config
        return getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)

    def _prefixed(self, input_ids, attention_mask, token_type_ids):
        """(regular inputs, prefixed inputs) as keyword arguments of the inner model, after checking that every
        row starts with the start token and that the prefixed rows fit the model's positions."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        drop = 0 if self.prepend else 1  # the input tokens the prefix replaces
        if drop and not bool((input_ids[:, 0] == self.start_id).all()):
            raise DataError(
                f"Self-Debias: every input must start with token id {self.start_id} (the {self.family} "
                f"start token the prefix replaces); got {input_ids[:, 0].tolist()}"
            )
        rows, k = input_ids.shape[0], len(self.prefix_ids)
        limit = self._max_positions()
        if limit is not None and input_ids.shape[1] + k - drop > limit:
            raise DataError(
                f"Self-Debias: an input of {input_ids.shape[1]} tokens behind the {k}-token prefix exceeds "
                f"the model's {limit} positions"
            )
        regular = {"input_ids": input_ids, "attention_mask": attention_mask}
        prefix = torch.tensor(self.prefix_ids, dtype=input_ids.dtype, device=input_ids.device).expand(rows, k)
        prefixed = {
            "input_ids": torch.cat([prefix, input_ids[:, drop:]], dim=1),
            "attention_mask": torch.cat([torch.ones_like(prefix), attention_mask[:, drop:]], dim=1),
        }
        if token_type_ids is not None:
            regular["token_type_ids"] = token_type_ids
            prefixed["token_type_ids"] = torch.cat([torch.zeros_like(prefix), token_type_ids[:, drop:]], dim=1)
        return regular, prefixed

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, output_hidden_states=False, **kwargs):
        if output_hidden_states:
            raise ConfigError(NOT_APPLICABLE_REASON + " (hidden states are not rescaled)")
        unknown = sorted(k for k, v in kwargs.items() if v is not None and k != "return_dict")
        if unknown:
            raise TypeError(f"SelfDebiasingLM.forward: unsupported argument(s) {', '.join(unknown)}")
        regular, prefixed = self._prefixed(input_ids, attention_mask, token_type_ids)
        shift = len(self.prefix_ids) - (0 if self.prepend else 1)
        logits = rescaled_logprobs(
            self.inner(**regular).logits,
            self.inner(**prefixed).logits[:, shift:],
            self.settings.decay_constant,
            self.settings.epsilon,
        )
        return SimpleNamespace(logits=logits)

    def logits_at(self, input_ids, attention_mask, rows, cols):
        """log p_debiased at the (row, col) pairs only: for masked LMs whose head the engine knows, the head runs
        at those positions alone (lmbias.engine.scoring.mlm_head), not over every token of both inputs."""
        from lmbias.engine.scoring import mlm_head

        head = mlm_head(self.inner)
        if head is None:
            return self.forward(input_ids, attention_mask).logits[rows, cols]
        regular, prefixed = self._prefixed(input_ids, attention_mask, None)
        shift = len(self.prefix_ids) - (0 if self.prepend else 1)
        hidden = self.inner.base_model(**regular).last_hidden_state[rows, cols]
        hidden_prefixed = self.inner.base_model(**prefixed).last_hidden_state[rows, [c + shift for c in cols]]
        return rescaled_logprobs(
            head(hidden), head(hidden_prefixed), self.settings.decay_constant, self.settings.epsilon
        )


def wrap(
    model, tokenizer, family: str, settings: SelfDebiasSettings | dict | None = None, key: str = "methods.self_debias"
) -> SelfDebiasingLM:
    """`model` behind Self-Debias with `settings` (a SelfDebiasSettings, or a method entry's options checked
    under config key `key`)."""
    if not isinstance(settings, SelfDebiasSettings):
        settings = SelfDebiasSettings.from_entry(dict(settings or {}), key)
    wrapped = SelfDebiasingLM(model, tokenizer, family, settings)
    wrapped.eval()
    return wrapped
