"""Applying a fitted SentenceDebias subspace to a model (fitting it is the training
package's job: training/sentence_debias.py, which imports this module, never the other way round).
This module imports torch: modules that must load without it import it inside functions.

A fitted folder holds ``sentence_debias.safetensors`` (the (k, d) subspace V, orthonormal rows) and
``sentence_debias.json`` (provenance and settings, among them ``application``). The subspace acts on the
hidden state h that feeds the LM head -- BERT the encoder's last hidden state before the MLM head
transform, GPT-2 the state after ln_f before lm_head, BART the decoder's last hidden state before lm_head,
a headless encoder its last hidden state -- through a forward hook on the model's base
(``model.base_model``) that rewrites the returned ModelOutput's last hidden state *and* the last element
of its hidden-states tuple, so logits, ``output_hidden_states`` and the engine's sentence embeddings all
see the same state. No mean is subtracted (as in bias-bench); BART's encoder states are not projected.

Applications (config ``methods.<name>.application``):

``project`` (default; bias-bench, Liang et al.)
    every token's state becomes h - V^T V h.
``normalise_project_normalise`` (the DA-Gender authors' evaluation code)
    every token's state is scaled to unit length, projected, and scaled to unit length again before the
    LM head (their ``emb /= norm; emb = dropspace(emb, gender_dir); emb /= norm`` per position, then
    ``model.cls`` / ``model.lm_head``). For a linear head (GPT-2, BART) that divides each position's
    logits by the norm of its projected state. Sentence embeddings (SEAT) are handled as their SEAT code
    does: the sentence is embedded from the *unprojected* final states with the benchmark's pooling, and
    the pooled vector is normalised, projected and normalised (:func:`pooled_states` and
    :meth:`Projection.pooled`), not pooled from per-token normalised states.

INLP (Ravfogel et al. 2020; fitted by the training package's inlp module) goes through the same hook with a
full (d, d) projection matrix P instead of a subspace: every token's state becomes P h (``h @ P.T`` row-wise), as
bias-bench's INLP models apply their projection to the final hidden states before the LM head. A fitted INLP folder
holds ``inlp.safetensors`` (tensor ``projection``) and ``inlp.json``.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import torch

from lmbias.errors import DataError

SUBSPACE_FILE = "sentence_debias.safetensors"
INFO_FILE = "sentence_debias.json"
INLP_FILE = "inlp.safetensors"
INLP_INFO_FILE = "inlp.json"
APPLICATIONS = ("project", "normalise_project_normalise")
DEFAULT_APPLICATION = "project"


def _read_fitted(method_dir, weights_file: str, info_file: str, what: str) -> tuple[dict, dict, Path]:
    """(tensors, info dict, weights path) of a fitted folder; DataError naming the file when unreadable."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    folder = Path(method_dir)
    path = folder / weights_file
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError) as exc:
        raise DataError(f"{what} unreadable: {exc}", path) from exc
    info_path = folder / info_file
    try:
        info = json.loads(info_path.read_text(encoding="utf-8")) if info_path.exists() else {}
    except json.JSONDecodeError as exc:
        raise DataError(f"not valid JSON: {exc}", info_path) from exc
    return tensors, info, path


def load_subspace(method_dir) -> tuple[torch.Tensor, dict]:
    """(components (k, d) float32 tensor, info dict) of a fitted folder; DataError naming the file when unusable."""
    tensors, info, path = _read_fitted(method_dir, SUBSPACE_FILE, INFO_FILE, "SentenceDebias subspace")
    comps = tensors.get("components")
    if comps is None or comps.ndim != 2 or comps.shape[0] < 1:
        raise DataError(
            f"SentenceDebias subspace: expected a (k, hidden) tensor 'components', got "
            f"{None if comps is None else tuple(comps.shape)}",
            path,
        )
    return comps.float(), info


def fitted_application(method_dir, info: dict) -> str:
    """The application recorded in a fitted folder's info (``project`` for folders written before the option)."""
    value = info.get("application", (info.get("settings") or {}).get("application", DEFAULT_APPLICATION))
    if value not in APPLICATIONS:
        raise DataError(f"application {value!r} is not one of {', '.join(APPLICATIONS)}", Path(method_dir) / INFO_FILE)
    return value


def _unit(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.normalize(x, dim=-1, eps=1e-12)


class Projection(torch.nn.Module):
    """Holds the subspace (or, for INLP, the full projection matrix) as a (non-persistent) buffer, so it
    follows model.to(device), and the application."""

    def __init__(
        self,
        components: torch.Tensor | None,
        application: str = DEFAULT_APPLICATION,
        matrix: torch.Tensor | None = None,
    ):
        super().__init__()
        self.register_buffer("components", None if components is None else components.float(), persistent=False)
        self.register_buffer("matrix", None if matrix is None else matrix.float(), persistent=False)
        self.application = application
        self.active = True  # False inside pooled_states(): the hook passes the states through

    def project(self, hidden: torch.Tensor) -> torch.Tensor:
        if self.matrix is not None:  # INLP: h -> P h
            return hidden @ self.matrix.to(hidden.device, hidden.dtype).T
        # .to(device): on a model dispatched over devices (device_map) the final states are on the last one
        v = self.components.to(hidden.device, hidden.dtype)
        return hidden - (hidden @ v.T) @ v

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        if self.application == "project":
            return self.project(hidden)
        # normalise, project, normalise in float32 whatever the autocast dtype; returned in the input's dtype
        with torch.autocast(hidden.device.type, enabled=False):
            return _unit(self.project(_unit(hidden.float()))).to(hidden.dtype)

    def pooled(self, vectors: torch.Tensor) -> torch.Tensor:
        """A pooled sentence vector (float32) as the application leaves it: projected (``project``; equal
        to pooling the projected states, every pooling being linear) or normalised, projected, normalised."""
        with torch.autocast(vectors.device.type, enabled=False):
            vectors = vectors.float()
            if self.application == "project":
                return self.project(vectors)
            return _unit(self.project(_unit(vectors)))


def _project_output(module, args, output):
    proj = module._sentence_debias
    if not proj.active:
        return output
    if isinstance(output, tuple):  # return_dict=False: element 0 is the last hidden state
        return (proj(output[0]),) + tuple(output[1:])
    original = output[0]
    projected = proj(original)
    output["last_hidden_state"] = projected
    for name in ("hidden_states", "decoder_hidden_states"):
        states = output.get(name) if hasattr(output, "get") else None
        if states is not None and len(states) and states[-1].shape == original.shape:
            output[name] = tuple(states[:-1]) + (proj(states[-1]),)
    return output


def installed_projection(model) -> Projection | None:
    """The SentenceDebias projection installed on `model`, or None."""
    base = getattr(model, "base_model", None)
    return getattr(base, "_sentence_debias", None) if base is not None else None


def install_projection(model, components, application: str = DEFAULT_APPLICATION):
    """Apply `components` (k, d) to the final hidden states of `model` (any family) from now on, as
    `application` says (module docstring).

    Idempotent per model: installing again replaces the subspace and the application. Returns the model.
    """
    if application not in APPLICATIONS:
        raise DataError(f"SentenceDebias application {application!r} is not one of {', '.join(APPLICATIONS)}")
    base = model.base_model
    hidden = getattr(model.config, "d_model", None) or getattr(model.config, "hidden_size", None) or model.config.n_embd
    comps = torch.as_tensor(components, dtype=torch.float32)
    if comps.ndim != 2 or comps.shape[1] != hidden:
        raise DataError(
            f"SentenceDebias subspace of shape {tuple(comps.shape)} does not fit a model with hidden size {hidden}"
        )
    q, _ = torch.linalg.qr(comps.double().T)  # orthonormalise (a no-op for fit_subspace's output)
    comps = q.T.float()
    device = next(model.parameters()).device
    if getattr(base, "_sentence_debias", None) is not None:
        base._sentence_debias.components = comps.to(device)
        base._sentence_debias.matrix = None  # a previously installed INLP matrix
        base._sentence_debias.application = application
        return model
    base._sentence_debias = Projection(comps, application).to(device)
    base.register_forward_hook(_project_output)
    return model


def _hidden_size(model) -> int:
    config = model.config
    return getattr(config, "d_model", None) or getattr(config, "hidden_size", None) or config.n_embd


def install_projection_matrix(model, matrix):
    """Apply the (d, d) projection `matrix` P to the final hidden states of `model` (any family) from now on:
    h -> P h, through the SentenceDebias hook (module docstring). Idempotent: installing again replaces it."""
    base = model.base_model
    hidden = _hidden_size(model)
    P = torch.as_tensor(matrix, dtype=torch.float32)
    if P.shape != (hidden, hidden):
        raise DataError(f"projection matrix of shape {tuple(P.shape)} does not fit a model with hidden size {hidden}")
    device = next(model.parameters()).device
    had_hook = getattr(base, "_sentence_debias", None) is not None
    base._sentence_debias = Projection(None, "project", matrix=P).to(device)
    if not had_hook:
        base.register_forward_hook(_project_output)
    return model


def load_projection_matrix(method_dir) -> tuple[torch.Tensor, dict]:
    """(P (d, d) float32, info dict) of a fitted INLP folder; DataError naming the file when unusable."""
    tensors, info, path = _read_fitted(method_dir, INLP_FILE, INLP_INFO_FILE, "INLP projection")
    P = tensors.get("projection")
    if P is None or P.ndim != 2 or P.shape[0] != P.shape[1]:
        raise DataError(
            f"INLP projection: expected a square tensor 'projection', got {None if P is None else tuple(P.shape)}", path
        )
    return P.float(), info


@contextlib.contextmanager
def pooled_states(model):
    """For sentence embeddings: inside the block the final states of a model with a ``normalise_project_
    normalise`` projection pass through unprojected, and the block gets the projection, whose ``pooled``
    the caller applies to each pooled vector. Any other model (none installed, or ``project``, where
    pooling the projected states is already right) is left as it is and the block gets None."""
    proj = installed_projection(model)
    if proj is None or proj.application == "project":
        yield None
        return
    proj.active = False
    try:
        yield proj
    finally:
        proj.active = True
