"""The fine-tuning loop (after HF's run_mlm_no_trainer.py): Accelerate, AdamW with a linear warm-up/decay
schedule, gradient clipping and accumulation, autocast, checkpoints with exact resume.

Exactness: batches come from `data.global_batches` (seeded by (seed, epoch)), noise from per-example
generators (seeded by (seed, epoch, example)), dropout from torch's RNG whose state is checkpointed per
process. The loss of an accumulation group is the sum of token losses divided by the group's token count
over ALL processes (times the world size, which DDP's gradient averaging divides out), so N processes
with batch b compute the gradient of one process with batch N*b.

Set LMBIAS_TRAIN_EXIT_AFTER_STEP=k to make the process exit abruptly (os._exit) after optimizer step k
and its checkpoint: how the tests kill a job.
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass

import torch

from lmbias.errors import ConfigError
from lmbias.progress import progress_bar, rate_line
from lmbias.training import checkpoints
from lmbias.training.data import Corpus, encode, encode_gpr, global_batches
from lmbias.training.dropout import set_dropout
from lmbias.training.objectives import (
    IGNORE,
    clean_batch,
    collate,
    embeddings_from,
    example_generator,
    lm_loss_sum,
    mask_words,
    pad,
)
from lmbias.training.packing import bias_bench_examples
from lmbias.training.settings import TEXT_PLACEHOLDER, TrainingSettings

log = logging.getLogger(__name__)

EXIT_ENV = "LMBIAS_TRAIN_EXIT_AFTER_STEP"


@dataclass
class TrainResult:
    log_rows: list[dict]
    selected_epoch: int | None
    steps: int
    resumed_from: int | None


def _method_of(checkpoint_dir, model_name: str) -> str | None:
    """The method a workflow job trains, read off its checkpoint folder's place in the results layout
    (results/<model>/<method>/seed<k>/model.checkpoints), for error messages; None elsewhere."""
    if not checkpoint_dir:
        return None
    parts = os.path.normpath(str(checkpoint_dir)).split(os.sep)
    if len(parts) >= 4 and parts[-4] == model_name and parts[-2].startswith("seed"):
        return parts[-3]
    return None


def enable_gradient_checkpointing(model) -> None:
    """Activations recomputed layer by layer in the backward pass (training.gradient_checkpointing).
    Non-reentrant torch.utils.checkpoint: it needs no input that requires grad, so a LoRA model's frozen
    embeddings need no enable_input_require_grads hook (the reentrant variant would drop the adapter's
    gradients without it), and it honours the RNG state, so dropout masks are the same in the recomputation."""
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise ConfigError(
            f"training.gradient_checkpointing: {type(model).__name__} does not support gradient "
            "checkpointing; set gradient_checkpointing: false"
        )
    enable = getattr(model, "activation_checkpointing_enable", None)  # transformers >= 5.23's name
    if enable is not None:
        enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:  # the older name (deprecated in 5.23, to go in v6)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if hasattr(model.config, "use_cache"):
        model.config.use_cache = False  # a key/value cache is useless in training and conflicts with recomputation


_MLM_HEADS = ("cls", "lm_head", "predictions")  # BERT, RoBERTa, ALBERT


class TrainModule(torch.nn.Module):
    """The model as the loop calls it (and DDP wraps it). For mlm/gpr the LM head runs only at the target
    positions (`targets`, a [batch, length] bool mask): the vocabulary projection of the other ~85 % of
    tokens feeds no loss. Without a known head, or without `targets`, the whole model runs as usual."""

    def __init__(self, model, objective: str):
        super().__init__()
        self.model = model
        self.head_name = None
        if objective in ("mlm", "gpr") and hasattr(model, getattr(model, "base_model_prefix", "")):
            self.head_name = next((h for h in _MLM_HEADS if isinstance(getattr(model, h, None), torch.nn.Module)), None)

    def forward(self, targets=None, **inputs):
        if self.head_name is None or targets is None:
            return self.model(**inputs)
        out = getattr(self.model, self.model.base_model_prefix)(**inputs, return_dict=True)
        return getattr(self.model, self.head_name)(out.last_hidden_state[targets]), out


def mixed_precision(precision: str) -> str:
    if precision == "auto":
        return "bf16" if torch.cuda.is_available() else "no"
    return {"fp32": "no", "bf16": "bf16", "fp16": "fp16"}[precision]


def make_accelerator(precision: str = "auto"):
    from accelerate import Accelerator
    from accelerate.utils import parse_flag_from_env

    from lmbias.engine.distributed import apply_slurm_rendezvous

    apply_slurm_rendezvous()  # a task started by srun (resources.tasks > 1): rank and rendezvous from Slurm
    cpu = parse_flag_from_env("ACCELERATE_USE_CPU") or not torch.cuda.is_available()
    return Accelerator(cpu=cpu, mixed_precision=mixed_precision(precision))


def _optimizer(model, s: TrainingSettings):
    no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight", "ln_", "layernorm")
    decay, rest = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:  # a LoRA method's frozen base
            continue
        (rest if any(k in name for k in no_decay) else decay).append(p)
    groups = [{"params": decay, "weight_decay": s.weight_decay}, {"params": rest, "weight_decay": 0.0}]
    # fused: one kernel over all tensors (on CPU ~5x faster than the per-tensor loop for bert-base)
    return torch.optim.AdamW(
        groups, lr=s.learning_rate, betas=(s.adam_beta1, s.adam_beta2), eps=s.adam_epsilon, fused=True
    )


def _cat_rows(batches: list[dict], key: str, value: int) -> torch.Tensor:
    rows = [r for b in batches for r in b[key].tolist()]
    return pad(rows, value)


#: Trainer's resume_from default: look for the newest good checkpoint in run()
SEARCH = "search"


class Trainer:
    """`fsdp_init` (distributed: fsdp): where the processes' weights come from (fsdp.INIT_MODES; a process
    that reads none passes the model built on meta). `resume_from`: the checkpoint to resume (None: none),
    when the caller has looked (an FSDP job decides before loading whether to read the weights at all)."""

    def __init__(
        self,
        model,
        tokenizer,
        family: str,
        corpus: Corpus,
        settings: TrainingSettings,
        seed: int,
        checkpoint_dir,
        fingerprint: str,
        accelerator,
        probe=None,
        model_name: str = "?",
        fsdp_init: str = "every_process",
        resume_from=SEARCH,
    ):
        self.s, self.seed, self.family, self.tok = settings, seed, family, tokenizer
        self.resume_from, self.fsdp_init = resume_from, fsdp_init
        self.acc, self.checkpoint_dir, self.fingerprint, self.probe = accelerator, checkpoint_dir, fingerprint, probe
        s = settings
        torch.manual_seed(seed)
        if (s.dropout, s.hidden_dropout, s.attention_dropout) != (None, None, None):
            model = set_dropout(
                model,
                s.dropout,
                s.hidden_dropout,
                s.attention_dropout,
                model_name=model_name,
                method=_method_of(checkpoint_dir, model_name),
            )
        self.adapter = None  # lmbias.training.adapters.Adapter of a LoRA method
        if s.adapter is not None:
            from lmbias.training.adapters import attach

            self.adapter = attach(model, s.adapter, s.objective, family, model_name)
            model = self.adapter.model  # the base with the adapter's layers in place: trained as a plain model
        if s.gradient_checkpointing:
            enable_gradient_checkpointing(model)
        self.trainable_parameters = sum(
            p.numel() for p in {id(p): p for p in model.parameters() if p.requires_grad}.values()
        )
        self.decoder_start = getattr(model.config, "decoder_start_token_id", None)
        if s.objective == "gpr":
            self.examples = encode_gpr(tokenizer, corpus.texts, corpus.labels, s.max_length, corpus.path)
            self.val = (
                encode_gpr(
                    tokenizer, corpus.val_texts, corpus.val_labels, s.max_length, f"{corpus.path} (validation rows)"
                )
                if corpus.val_texts
                else []
            )
        else:
            words = s.objective == "mlm" and s.whole_word_masking
            texts, partners = corpus.texts, None
            if s.er_lambda is not None:
                partners = [t if t is not None else corpus.texts[i] for i, t in enumerate(corpus.swaps)]
                if (
                    s.er_lm_side == "counterfactual"
                ):  # the LM loss reads the counterfactual, the partner is the original
                    texts, partners = partners, texts
            if s.pack_texts:  # bias-bench's blocks (and their CDA on the blocks)
                self.examples = bias_bench_examples(tokenizer, self._templated(texts), s, corpus.path)
            else:
                self.examples = encode(tokenizer, self._templated(texts), s.max_length, words=words)
            if s.objective == "infilling" and s.infilling_mode == "static_words":
                noised = [
                    mask_words(t, example_generator(seed, 0, i), s.infilling_mask_ratio, tokenizer.mask_token)
                    for i, t in enumerate(texts)
                ]
                for ex, enc in zip(self.examples, encode(tokenizer, noised, s.max_length)):
                    ex.noised = enc.ids
            self.val = []
        self.swaps = None
        if s.er_lambda is not None:
            self.swaps = encode(tokenizer, self._templated(partners), s.max_length)
            self.has_swap = [t is not None for t in corpus.swaps]
        # ER sentences padded to max_length for the pooled positions of mean_padded / pad_position
        self.er_width = s.max_length if s.er_pooling in ("mean_padded", "pad_position", "family_padded") else None
        self.lengths = [len(e.ids) for e in self.examples]
        self.world, self.rank = accelerator.num_processes, accelerator.process_index
        self.global_batch = s.batch_size * self.world
        self.steps_per_epoch = len(
            global_batches(
                self.lengths, self.global_batch * s.gradient_accumulation_steps, seed, 0, s.group_by_length, self.world
            )
        )
        if self.steps_per_epoch == 0:
            raise ValueError(f"{len(self.examples)} examples give no batch on {self.world} processes")
        self.total_steps = self.steps_per_epoch * s.epochs
        if s.max_steps is not None:
            self.total_steps = min(self.total_steps, s.max_steps)
        from transformers import get_linear_schedule_with_warmup

        warmup = s.warmup_steps if s.warmup_steps is not None else math.ceil(s.warmup_ratio * self.total_steps)
        self.hf_model = model
        self.fsdp = s.distributed == "fsdp"
        if self.fsdp:  # sharded by torch's fully_shard (lmbias.training.fsdp); the optimizer over the shards
            from lmbias.training import fsdp

            self.hf_class, self.hf_config = type(model), model.config
            module = TrainModule(model, s.objective)
            # rank 0 of a rank0 init: its full weights (references, no copy) to broadcast after sharding
            full = module.state_dict() if fsdp_init == "rank0" and self.rank == 0 else None
            self.model = fsdp.shard(module, accelerator.device, self.world, mixed_precision(s.precision))
            fsdp.materialize(self.model, accelerator.device, fsdp_init, full)
            del full, module
            self.optimizer = _optimizer(self.model, s)
            self.scheduler = get_linear_schedule_with_warmup(self.optimizer, warmup, self.total_steps)
        else:
            optimizer = _optimizer(model, s)
            self.scheduler = get_linear_schedule_with_warmup(optimizer, warmup, self.total_steps)
            self.model, self.optimizer = accelerator.prepare(TrainModule(model, s.objective), optimizer)

    def final_model(self):
        """The trained model as one ordinary model: FSDP's shards gathered (a collective call: every process
        calls it; the model on the main process, None elsewhere); otherwise the model itself."""
        if not self.fsdp:
            return self.hf_model
        from lmbias.training import fsdp

        state = fsdp.full_state_dict(self.model, prefix="model.")
        return fsdp.plain_model(self.hf_class, self.hf_config, state) if self.acc.is_main_process else None

    def _templated(self, texts: list[str]) -> list[str]:
        """clm: each text written into settings.text_template (other objectives: the text as is)."""
        template = self.s.text_template
        if self.s.objective != "clm" or template == TEXT_PLACEHOLDER:
            return list(texts)
        return [template.replace(TEXT_PLACEHOLDER, t) for t in texts]

    # ------------------------------------------------------------------------------------------ one step

    def _micro(self, idx: list[int], epoch: int) -> dict:
        ex = [self.examples[i] for i in idx]
        batch = collate(self.s.objective, ex, idx, self.seed, epoch, self.tok, self.s, self.decoder_start)
        if self.swaps is not None:
            pad_id, width = self.tok.pad_token_id, self.er_width
            batch["er"] = (
                clean_batch(ex, pad_id, width),
                clean_batch([self.swaps[i] for i in idx], pad_id, width),
                torch.tensor([self.has_swap[i] for i in idx], dtype=torch.float32),
            )
        return batch

    def _forward_loss(self, batch: dict, n_tokens: int, n_pairs: int) -> tuple[torch.Tensor, float, float]:
        """(loss to backpropagate, token-loss sum, ER sum) of one micro-batch; one forward pass (ER: the
        noised batch, the clean sentences and their counterfactuals stacked)."""
        model, dev = self.model, self.acc.device
        b = batch["input_ids"].size(0)
        inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
        for key in ("decoder_input_ids", "decoder_attention_mask"):
            if key in batch:
                inputs[key] = batch[key]
        er = batch.get("er")
        if er is not None:
            s_clean, c_clean, has = er
            parts = [inputs, s_clean, c_clean]
            stacked = {
                "input_ids": _cat_rows(parts, "input_ids", self.tok.pad_token_id),
                "attention_mask": _cat_rows(parts, "attention_mask", 0),
            }
            if self.family == "seq2seq":
                from transformers.models.bart.modeling_bart import shift_tokens_right

                dec = [
                    inputs["decoder_input_ids"].tolist(),
                    shift_tokens_right(s_clean["input_ids"], self.tok.pad_token_id, self.decoder_start).tolist(),
                    shift_tokens_right(c_clean["input_ids"], self.tok.pad_token_id, self.decoder_start).tolist(),
                ]
                stacked["decoder_input_ids"] = pad([r for d in dec for r in d], self.tok.pad_token_id)
                if "decoder_attention_mask" in inputs:  # the ER rows' decoders unmasked, as without the mask
                    width = stacked["decoder_input_ids"].size(1)
                    stacked["decoder_attention_mask"] = pad(
                        inputs["decoder_attention_mask"].tolist() + [[1] * width] * (2 * b), 0
                    )
            inputs = stacked
        inputs = {k: v.to(dev) for k, v in inputs.items()}
        labels = batch["labels"]
        selective = self.acc.unwrap_model(self.model).head_name is not None
        if selective:
            targets = torch.zeros(inputs["input_ids"].shape, dtype=torch.bool)
            targets[:b, : labels.size(1)] = labels != IGNORE
            inputs["targets"] = targets.to(dev)
        with self.acc.autocast():
            out = model(**inputs, output_hidden_states=er is not None)
        if selective:
            logits, out = out
            flat = labels[labels != IGNORE].to(logits.device)
            lm_sum = torch.nn.functional.cross_entropy(logits.float(), flat, reduction="sum")
        else:
            logits = out.logits[:b]
            if logits.size(1) > labels.size(1):  # stacked with longer clean rows
                logits = logits[:, : labels.size(1)]
            lm_sum, _ = lm_loss_sum(logits, labels, self.s.objective)
        loss = lm_sum / max(n_tokens, 1) * self.world
        er_sum = 0.0
        if er is not None:
            # seq2seq: the decoder input is the shifted sentence, as many real positions as the encoder's mask
            e = embeddings_from(out, inputs["attention_mask"], self.family, self.s.er_pooling, self.er_width).float()
            e_s, e_c = e[b : 2 * b], e[2 * b :]
            terms = (1.0 - torch.nn.functional.cosine_similarity(e_s, e_c, dim=-1)) * has.to(dev)
            er_total = terms.sum()
            loss = loss + self.s.er_lambda * er_total / max(n_pairs, 1) * self.world
            er_sum = float(er_total.detach())
        return loss, float(lm_sum.detach()), er_sum

    def _reduce(self, values: list[float]) -> list[float]:
        t = torch.tensor(values, dtype=torch.float64, device=self.acc.device)
        if self.world > 1:
            t = self.acc.reduce(t, reduction="sum")
        return t.tolist()

    def _count_targets(self, batch: dict) -> int:
        labels = batch["labels"]
        if self.s.objective == "clm":
            labels = labels[:, 1:]
        return int((labels != IGNORE).sum())

    def _step(self, micro_idx: list[list[int]], epoch: int) -> dict:
        started = time.perf_counter()
        batches = [self._micro(idx, epoch) for idx in micro_idx]
        local = [
            sum(self._count_targets(b) for b in batches),
            sum(len(i) for i in micro_idx),
            sum(int(b["attention_mask"].sum()) for b in batches),
        ]
        n_tokens, n_pairs, n_real = self._reduce(local)
        lm_total, er_total = 0.0, 0.0
        self.model.train()
        for k, batch in enumerate(batches):
            sync = k == len(batches) - 1
            if self.fsdp:  # gradients reduce-scattered on the last micro-batch only
                self.model.set_requires_gradient_sync(sync)
                ctx = _nullcontext()
            else:
                ctx = self.acc.no_sync(self.model) if not sync and self.world > 1 else _nullcontext()
            with ctx:
                loss, lm_sum, er_sum = self._forward_loss(batch, n_tokens, n_pairs)
                self.acc.backward(loss)
            lm_total += lm_sum
            er_total += er_sum
        if self.s.max_grad_norm is not None:
            if self.fsdp:  # the norm of the sharded gradients (DTensors) over all processes
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.s.max_grad_norm)
            else:
                self.acc.clip_grad_norm_(self.model.parameters(), self.s.max_grad_norm)
        lr = self.scheduler.get_last_lr()[0]
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        lm_total, er_total = self._reduce([lm_total, er_total])
        elapsed = time.perf_counter() - started
        row = {
            "loss": lm_total / max(n_tokens, 1),
            "learning_rate": lr,
            "tokens": int(n_real),
            "tokens_per_second": n_real / elapsed,
            "trainable_parameters": self.trainable_parameters,
        }
        if self.s.er_lambda is not None:
            row["er_loss"] = er_total / max(n_pairs, 1)
        return row

    # ---------------------------------------------------------------------------------------- validation

    def validation_accuracy(self) -> float:
        """GPR: share of validation examples whose argmax at the mask is the pronoun's token."""
        model = self.hf_model
        model.eval()
        correct = 0
        with torch.no_grad():
            for start in range(0, len(self.val), 64):
                ex = self.val[start : start + 64]
                batch = clean_batch(ex, self.tok.pad_token_id)
                with self.acc.autocast():
                    logits = model(**{k: v.to(self.acc.device) for k, v in batch.items()}).logits
                pos = torch.tensor([e.target_pos for e in ex])
                pred = logits[torch.arange(len(ex)), pos.to(logits.device)].argmax(-1).cpu()
                correct += int((pred == torch.tensor([e.target for e in ex])).sum())
        model.train()
        return correct / max(len(self.val), 1)

    # --------------------------------------------------------------------------------------------- loop

    def run(self) -> TrainResult:
        s, acc = self.s, self.acc
        state = {"step": 0, "epoch": 0, "next_batch": 0, "log": [], "best_accuracy": None, "best_epoch": None}
        best_state = None
        resumed = None
        path = self.resume_from
        if path == SEARCH:
            path = checkpoints.latest_good(self.checkpoint_dir, self.fingerprint) if self.checkpoint_dir else None
        if path is None and self.fsdp_init == "checkpoint":  # built on meta for a checkpoint that is not there
            raise RuntimeError("FSDP: the model was built without weights to resume a checkpoint, but none is given")
        if path is not None:
            state, best_state = checkpoints.load(path, acc, self.model, self.optimizer, self.scheduler)
            resumed = state["step"]
            log.info("resuming from %s (step %d, epoch %d)", path, state["step"], state["epoch"] + 1)
        exit_after = int(os.environ.get(EXIT_ENV, "0") or 0)
        step = state["step"]
        first_new_row = len(state["log"])  # the rows of this run (a resumed run continues the log)
        started = time.perf_counter()
        bar = progress_bar("training", "steps", total=self.total_steps, initial=step, enabled=acc.is_main_process)
        try:
            step, best_state = self._loop(state, best_state, step, exit_after, bar)
        finally:
            bar.close()
        seconds = time.perf_counter() - started
        new = state["log"][first_new_row:]
        if acc.is_main_process:
            tokens = sum(int(r.get("tokens") or 0) for r in new)
            log.info(rate_line(f"trained {len(new):,} steps,", tokens, "tokens", seconds))
        selected = None
        if s.select_epoch == "validation_accuracy" and best_state is not None:
            checkpoints.restore_state(acc.unwrap_model(self.model), best_state)
            selected = state["best_epoch"]
        return TrainResult(state["log"], selected, step, resumed)

    def _loop(self, state: dict, best_state, step: int, exit_after: int, bar) -> tuple[int, dict | None]:
        """The epochs and steps from `state` on; (last step, best state for select_epoch)."""
        s, acc = self.s, self.acc
        for epoch in range(state["epoch"], s.epochs):
            if step >= self.total_steps:
                break
            steps = self._epoch_steps(epoch)
            first = state["next_batch"] if epoch == state["epoch"] else 0
            cut_short = False  # max_steps reached before the epoch's last batch
            for k in range(first, len(steps)):
                row = self._step(steps[k], epoch)
                step += 1
                row.update(step=step, epoch=epoch + 1, validation_metric=None)
                if self.probe is not None and s.eval_bias_every_steps and step % s.eval_bias_every_steps == 0:
                    row["bias_metric"] = self._probe()
                state["log"].append(row)
                bar.set_postfix(epoch=epoch + 1, loss=f"{row['loss']:.4f}", refresh=False)
                bar.update(1)
                done = step >= self.total_steps
                if (
                    s.checkpoint_every_steps
                    and step % s.checkpoint_every_steps == 0
                    and not done
                    and k + 1 < len(steps)
                ):
                    state.update(step=step, epoch=epoch, next_batch=k + 1)
                    checkpoints.save(
                        self.checkpoint_dir,
                        step,
                        self.fingerprint,
                        acc,
                        self.model,
                        self.optimizer,
                        self.scheduler,
                        state,
                        best_state,
                    )
                if exit_after and step == exit_after:
                    log.warning("%s=%d: exiting abruptly after step %d", EXIT_ENV, exit_after, step)
                    os._exit(75)
                if done:
                    cut_short = k + 1 < len(steps)
                    break
            if cut_short:
                break  # stopped by max_steps inside the epoch: no end-of-epoch evaluation
            if self.val:
                accuracy = self.validation_accuracy()
                state["log"][-1]["validation_metric"] = accuracy
                log.info("epoch %d: validation pronoun accuracy %.4f", epoch + 1, accuracy)
                if s.select_epoch == "validation_accuracy" and (
                    state["best_accuracy"] is None or accuracy > state["best_accuracy"]
                ):
                    state.update(best_accuracy=accuracy, best_epoch=epoch + 1)
                    best_state = checkpoints.trainable_state(acc.unwrap_model(self.model))
            if self.checkpoint_dir and step < self.total_steps:
                state.update(step=step, epoch=epoch + 1, next_batch=0)
                checkpoints.save(
                    self.checkpoint_dir,
                    step,
                    self.fingerprint,
                    acc,
                    self.model,
                    self.optimizer,
                    self.scheduler,
                    state,
                    best_state,
                )
        return step, best_state

    def _epoch_steps(self, epoch: int) -> list[list[list[int]]]:
        """This process's micro-batches of every optimizer step of `epoch`: the step batches (batch_size x
        world x accumulation examples, `global_batches`) cut into `accumulation` micro-batches of batch_size x
        world, each cut into contiguous per-process slices. So the examples of a step, and the order of the
        steps, do not depend on how the step is split over processes and accumulation."""
        micro = self.global_batch
        out = []
        for batch in global_batches(
            self.lengths,
            micro * self.s.gradient_accumulation_steps,
            self.seed,
            epoch,
            self.s.group_by_length,
            self.world,
        ):
            parts = []
            for chunk in (batch[i : i + micro] for i in range(0, len(batch), micro)):
                if len(chunk) < self.world:
                    continue
                base, extra = divmod(len(chunk), self.world)
                lo = self.rank * base + min(self.rank, extra)
                parts.append(chunk[lo : lo + base + (1 if self.rank < extra else 0)])
            out.append(parts)
        return out

    def _probe(self) -> float | None:
        value = None
        if self.acc.is_main_process:
            value = float(self.probe(self.hf_model, self.tok))
        self.acc.wait_for_everyone()
        return value


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
