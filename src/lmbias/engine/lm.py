"""`LanguageModel`: one loaded model as the benchmarks see it, and the requests they may make of it.

A scorer gets one object, not (model, tokenizer, family, model entry, ...), and asks it for what it needs, in the
spirit of lm-evaluation-harness's requests:

* `sentence_logprobs` / `grouped_sentence_logprobs`: log-likelihood of whole texts under a causal LM, the
  latter reading the token prefix a group's texts share once (lmbias.engine.prefix_cache; a continuation's
  log-likelihood given a context is ll(context + continuation) - ll(context));
* `continuation_logprobs`: log p(choice | context) of multiple-choice continuations, lm-eval's `loglikelihood`
  request, each context read once for its choices (lmbias.engine.continuations);
* `pseudo_logprobs`: log-probabilities of tokens hidden one input at a time, for masked and encoder-decoder
  models (pseudo-log-likelihood, lmbias.engine.pll); `choice_pseudo_logprobs`: multiple-choice answers read that
  way after their prompt, the masked counterpart of `continuation_logprobs`;
* `rolling_nll`: every token of long texts scored once in windows the model can hold, log-likelihood for a
  causal LM and pseudo-log-likelihood otherwise (lm-eval's loglikelihood_rolling; lmbias.engine.rolling);
* `candidate_logprobs`: log-probabilities of candidate tokens at a mask (a masked LM) or as the decoder's next
  token (an encoder-decoder's infilling), dispatched on the request's kind (lmbias.engine.scoring);
* `top_k_fills`: a masked LM's k most probable tokens at a mask (HONEST's completions; lmbias.engine.fills);
* `embeddings`: pooled sentence embeddings (lmbias.engine.embeddings);
* `generate`: continuations of prompts, the model entry's chat template applied (lmbias.engine.generation,
  lmbias.engine.chat); `prompt` renders one prompt the same way for a scorer that reads likelihoods;
* `context_window`: the positions the model can read (lmbias.engine.context_window).

The family dispatch lives here: a request that the model's family cannot serve raises DataError naming the
request and the family (ConfigError for generation, as lmbias.engine.generation.check_generative says). What a
family reads differs in kind, not only in code (a causal LM has no mask; an encoder-decoder's decoder writes the
masked word out), so a benchmark names one reading per family (lmbias.benchmarks.definition.readings) and each
reading builds its own inputs without asking the family. `family` itself stays for metadata (a score file's
`score_kind`) and for checking family-dependent options (SEAT's poolings per family). The token budget and the
scoring dtype are the job's (lmbias.engine.batching's context managers around the scorer), so every request
here runs under them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence

import numpy as np

from lmbias.engine import chat, continuations, embeddings, fills, generation, pll, prefix_cache, rolling, scoring
from lmbias.engine.batching import EngineStats
from lmbias.engine.context_window import ContextWindow, context_window
from lmbias.errors import DataError

#: The request types of `candidate_logprobs` and the family each needs.
_CANDIDATE_READERS = {
    scoring.MaskedRequest: ("mlm", scoring.masked_logprobs),
    scoring.MaskedIdsRequest: ("mlm", scoring.masked_logprobs_ids),
    scoring.InfillRequest: ("seq2seq", scoring.infill_logprobs),
    scoring.InfillIdsRequest: ("seq2seq", scoring.infill_logprobs_ids),
}

#: How each family reads a word in context, as error messages name it.
_READINGS = {"mlm": "masked", "clm": "causal", "seq2seq": "encoder-decoder", "encoder": "encoder"}


@dataclasses.dataclass(frozen=True)
class LanguageModel:
    """A loaded model with its tokenizer, family (mlm | clm | seq2seq | encoder), model entry and name (its chat
    template), and the job's EngineStats, which every request adds its counts to."""

    model: object
    tokenizer: object
    family: str
    model_entry: Mapping = dataclasses.field(default_factory=dict)
    model_name: str = "?"
    stats: EngineStats = dataclasses.field(default_factory=EngineStats)

    def __post_init__(self):
        if self.stats is None:  # callers pass the scorer's optional `stats` straight through
            object.__setattr__(self, "stats", EngineStats())

    # -- what the model reads ----------------------------------------------------------------------------------

    def require(self, families: Sequence[str], what: str) -> None:
        """DataError unless the model's family is one of `families`, naming `what` asks and the family."""
        if self.family not in families:
            wanted = " or ".join(_READINGS.get(f, f) for f in families)
            article = "an" if wanted[0] in "aeiou" else "a"
            raise DataError(f"{what} needs {article} {wanted} model, not family {self.family!r}")

    def with_model(self, model) -> LanguageModel:
        """The same interface over another view of the model (e.g. a Self-Debias wrapper's prepending view)."""
        return dataclasses.replace(self, model=model)

    def context_window(self) -> ContextWindow:
        """The positions the model can read: the smaller of its tokenizer's and its config's limits."""
        return context_window(self.model, self.tokenizer)

    # -- likelihoods ---------------------------------------------------------------------------------------------

    def sentence_logprobs(
        self, texts: Sequence[str], batch_size: int = 64, max_length: int = 512, context: str = "bos"
    ) -> np.ndarray:
        """Log-likelihood of each text under a causal LM (lmbias.engine.scoring.sentence_logprobs)."""
        self.require(("clm",), "sentence log-likelihood")
        return scoring.sentence_logprobs(
            self.model,
            self.tokenizer,
            texts,
            batch_size=batch_size,
            max_length=max_length,
            stats=self.stats,
            context=context,
        )

    def grouped_sentence_logprobs(
        self,
        texts: Sequence[str],
        groups: Sequence[Hashable],
        batch_size: int = 64,
        max_length: int = 512,
        context: str = "bos",
        score_prefix: bool = True,
    ) -> np.ndarray:
        """`sentence_logprobs` with the prefix a group's texts share read once (lmbias.engine.prefix_cache)."""
        self.require(("clm",), "sentence log-likelihood")
        return prefix_cache.grouped_sentence_logprobs(
            self.model,
            self.tokenizer,
            texts,
            groups,
            batch_size=batch_size,
            max_length=max_length,
            stats=self.stats,
            context=context,
            score_prefix=score_prefix,
        )

    def continuation_logprobs(
        self,
        contexts: Sequence[str],
        choices: Sequence[Sequence[str]],
        batch_size: int = 64,
        max_length: int = 512,
    ) -> list[list[continuations.ContinuationScore]]:
        """log p(choice | context) of each context's choices as lm-eval's loglikelihood request computes it, the
        context read once for its choices (lmbias.engine.continuations)."""
        self.require(("clm",), "continuation log-likelihood")
        return continuations.continuation_logprobs(
            self.model,
            self.tokenizer,
            contexts,
            choices,
            batch_size=batch_size,
            max_length=max_length,
            stats=self.stats,
        )

    def pseudo_logprobs(
        self,
        sequences: Sequence[Sequence[int]],
        positions: Sequence[Sequence[int]],
        batch_size: int = 64,
        max_length: int = 512,
    ) -> list[np.ndarray]:
        """log p of each sequence's tokens at `positions`, each hidden in an input of its own (masked and
        encoder-decoder models; lmbias.engine.pll.token_logprobs)."""
        self.require(("mlm", "seq2seq"), "pseudo-log-likelihood")
        return pll.token_logprobs(
            self.model,
            self.tokenizer,
            self.family,
            sequences,
            positions,
            batch_size=batch_size,
            max_length=max_length,
            stats=self.stats,
        )

    def choice_pseudo_logprobs(
        self,
        prompts: Sequence[str],
        choices: Sequence[Sequence[str]],
        delimiter: str = " ",
        batch_size: int = 64,
        max_length: int = 512,
    ) -> list[list[tuple[float, int]]]:
        """(pseudo-log-likelihood, word pieces) of each prompt's choices, each read after prompt + delimiter with
        its pieces hidden left to right (lmbias.engine.pll.choice_l2r_inputs), all in one engine call: the masked
        and encoder-decoder counterpart of `continuation_logprobs`. DataError naming the prompt where prompt and
        choice exceed max_length or a choice has no token of its own."""
        self.require(("mlm", "seq2seq"), "a choice's pseudo-log-likelihood")
        seqs, positions, owners = [], [], []
        pieces = [[0] * len(options) for options in choices]
        for i, per_choice in enumerate(pll.choice_l2r_inputs(self.tokenizer, prompts, choices, delimiter)):
            for k, inputs in enumerate(per_choice):
                if len(inputs[0][0]) > max_length:
                    raise DataError(
                        f"prompt {i} ({prompts[i][:60]!r}...) with the choice {choices[i][k]!r}: {len(inputs[0][0])} "
                        f"tokens exceed max_length={max_length}"
                    )
                pieces[i][k] = len(inputs)
                for masked, position in inputs:
                    seqs.append(masked)
                    positions.append([position])
                    owners.append((i, k))
        values = self.pseudo_logprobs(seqs, positions, batch_size=batch_size, max_length=max_length)
        sums = [[0.0] * len(options) for options in choices]
        for (i, k), value in zip(owners, values):
            sums[i][k] += float(value[0])
        return [list(zip(s, n)) for s, n in zip(sums, pieces)]

    def candidate_logprobs(self, requests: Sequence, batch_size: int = 64, max_length: int = 512) -> list[np.ndarray]:
        """log p of each request's candidates, one array per request. The requests are of one kind
        (lmbias.engine.scoring's MaskedRequest, MaskedIdsRequest for a masked LM; InfillRequest,
        InfillIdsRequest for an encoder-decoder), read in one batched engine call."""
        kinds = {type(r) for r in requests}
        if len(kinds) > 1:
            raise DataError(
                f"candidate log-probs: requests of one kind in a call, got {sorted(k.__name__ for k in kinds)}"
            )
        if not kinds:
            return []
        kind = kinds.pop()
        if kind not in _CANDIDATE_READERS:
            raise DataError(f"candidate log-probs: {kind.__name__} is not a request of lmbias.engine.scoring")
        family, read = _CANDIDATE_READERS[kind]
        self.require((family,), f"candidate log-probs of {kind.__name__}")
        return read(
            self.model, self.tokenizer, requests, batch_size=batch_size, max_length=max_length, stats=self.stats
        )

    def top_k_fills(
        self, texts: Sequence[str], k: int, batch_size: int = 64, max_length: int = 512
    ) -> list[list[tuple[int, float]]]:
        """[(token id, log p), ...] of the k most probable tokens at the one mask token of each text, most probable
        first, as the fill-mask pipeline's top_k (masked LMs; lmbias.engine.fills.masked_top_k)."""
        self.require(("mlm",), "top-k fills of a mask")
        return fills.masked_top_k(
            self.model, self.tokenizer, texts, k, batch_size=batch_size, max_length=max_length, stats=self.stats
        )

    def rolling_view(self) -> LanguageModel:
        """The model as `rolling_nll` reads a text: a causal LM reads each window alone (a Self-Debias wrapper
        puts its prefix before it), other families a chunk framed by their special tokens (lmbias.engine.rolling).
        Its `added_positions` and `context_window` are what a window must fit."""
        return self.with_model(rolling.rolling_view(self.model, self.family))

    def added_positions(self) -> int:
        """Positions the model adds to every input it reads: a Self-Debias wrapper's prefix, else none."""
        return rolling.added_positions(self.model)

    def rolling_nll(
        self,
        texts: Sequence[str],
        max_length: int,
        stride: int | None = None,
        batch_size: int = 64,
        key: str = "max_length",
    ) -> list[rolling.RollingWindow]:
        """Every token of every text scored once, in windows of at most max_length tokens (lm-eval's
        loglikelihood_rolling): a causal LM's log-likelihood in windows that move by `stride` tokens, a masked or
        encoder-decoder model's pseudo-log-likelihood in chunks (lmbias.engine.rolling); `key` names max_length's
        option in its errors."""
        self.require(("clm", "mlm", "seq2seq"), "rolling log-likelihood")
        return rolling.rolling_nll(
            rolling.rolling_view(self.model, self.family),
            self.tokenizer,
            self.family,
            texts,
            max_length,
            stride,
            batch_size=batch_size,
            stats=self.stats,
            key=key,
        )

    # -- embeddings and generation -------------------------------------------------------------------------------

    def embeddings(
        self,
        texts: Sequence[str],
        poolings: Sequence[str],
        batch_size: int = 64,
        max_length: int = 512,
        pad_to: int | None = embeddings.DA_GENDER_PAD_TO,
    ) -> dict[str, np.ndarray]:
        """{pooling: (len(texts), hidden) float32} (lmbias.engine.embeddings.sentence_embeddings)."""
        return embeddings.sentence_embeddings(
            self.model,
            self.tokenizer,
            texts,
            poolings,
            self.family,
            batch_size=batch_size,
            max_length=max_length,
            pad_to=pad_to,
            stats=self.stats,
        )

    @property
    def uses_chat_template(self) -> bool:
        """Whether prompts are read as a user turn of the model entry's chat template."""
        return chat.uses_chat_template(self.model_entry)

    def prompt(self, text: str) -> str:
        """`text` as the model is asked it: unchanged, or a user turn of its chat template (lmbias.engine.chat)."""
        return chat.wrap_prompt(text, self.tokenizer, self.model_entry, self.model_name)

    def chat_provenance(self) -> dict[str, str]:
        """What a prompted benchmark's scores record of the chat template (lmbias.engine.chat.chat_provenance)."""
        return chat.chat_provenance(self.model_entry, self.model_name)

    def generate(
        self,
        prompts: Sequence[str],
        settings: generation.GenerationSettings,
        prompt_keys: Sequence[int] | None = None,
        what: str = "generation",
    ) -> list[list[generation.Continuation]]:
        """settings.samples_per_prompt continuations of every prompt, each asked through `prompt` (a rendered
        chat template holds its special tokens, so none are added then); ConfigError naming `what` for a
        family that does not generate (lmbias.engine.generation)."""
        generation.check_generative(self.family, what)
        return generation.generate_continuations(
            self.model,
            self.tokenizer,
            self.family,
            [self.prompt(p) for p in prompts],
            settings,
            prompt_keys=None if prompt_keys is None else list(prompt_keys),
            stats=self.stats,
            add_special_tokens=not self.uses_chat_template,
        )
