"""Chat templates for instruct models (models.<name>.chat_template, models.<name>.system_prompt).

A prompted benchmark (WinoGender's multiple choice, BOLD's generation) asks an instruct model the way
lm-evaluation-harness's `--apply_chat_template` does: the prompt becomes one user turn (after the system
prompt, when one is set), rendered with the generation prompt, and the choice or the generation follows the
assistant's turn. Sentence-likelihood benchmarks (CrowS-Pairs, StereoSet, WinoBias, SEAT, ...) never call
this: they score raw text whatever the entry says (docs/llms.md says why).

`chat_template` is true (the tokenizer's own template), a Jinja template string, or the path of a template
file (`*.jinja`, or any existing file); false or unset: the raw prompt. Unset, with a tokenizer that has a template
of its own (an instruct model), the first prompt wrapped logs one warning per tokenizer loaded (so per model and
job) naming models.<name>.chat_template: such a model asked a raw prompt often ends its turn at once (BBQ's
generated answers of SmolLM2-135M-Instruct: most of them empty). `false` says the raw prompt is meant, and is quiet.
"""

from __future__ import annotations

import hashlib
import logging
import weakref
from collections.abc import Mapping
from pathlib import Path

from lmbias.errors import ConfigError

log = logging.getLogger(__name__)

#: Tokenizers already warned about (warn_unused_template): one warning per loaded tokenizer.
_WARNED: weakref.WeakSet = weakref.WeakSet()
#: The same for a tokenizer that takes no weak reference: (model name, id).
_WARNED_KEYS: set[tuple[str, int]] = set()


def _template_text(model_name: str, setting) -> str | None:
    """The template string of `setting` (None: the tokenizer's own template)."""
    key = f"models.{model_name}.chat_template"
    if setting is True:
        return None
    if not isinstance(setting, str) or not setting.strip():
        raise ConfigError(f"{key}: expected true, a template string or a template file, got {setting!r}")
    path = Path(setting)
    looks_like_file = "{" not in setting and (setting.endswith((".jinja", ".jinja2", ".j2")) or path.is_file())
    if looks_like_file:
        if not path.is_file():
            raise ConfigError(f"{key}: template file {setting} does not exist")
        return path.read_text(encoding="utf-8")
    return setting


def uses_chat_template(model_entry: Mapping) -> bool:
    """Whether prompted benchmarks wrap their prompts in the model's chat template."""
    return model_entry.get("chat_template") not in (None, False)


def warn_unused_template(tokenizer, model_entry: Mapping, model_name: str) -> bool:
    """Log one warning (per tokenizer object) when the entry leaves `chat_template` unset and the tokenizer has a
    template of its own; whether it warned now."""
    if model_entry.get("chat_template") is not None or not getattr(tokenizer, "chat_template", None):
        return False
    try:
        if tokenizer in _WARNED:
            return False
        _WARNED.add(tokenizer)
    except TypeError:  # no weak reference to it
        if (model_name, id(tokenizer)) in _WARNED_KEYS:
            return False
        _WARNED_KEYS.add((model_name, id(tokenizer)))
    key = f"models.{model_name}.chat_template"
    log.warning(
        "%s is unset, but the tokenizer of %r has a chat template: prompted benchmarks ask it raw prompts, which an "
        "instruct model may answer with nothing at all; set %s: true to ask it through its template (false: raw "
        "prompts on purpose, no warning)",
        key,
        model_name,
        key,
    )
    return True


def wrap_prompt(prompt: str, tokenizer, model_entry: Mapping, model_name: str) -> str:
    """`prompt` as the model reads it: unchanged without a chat template, else a user turn (after the system
    prompt, when set) rendered with the generation prompt, so what is scored or generated next is the
    assistant's answer. ConfigError naming models.<name>.chat_template when the template does not render; one
    warning when the entry leaves the tokenizer's own template unused (warn_unused_template)."""
    if not uses_chat_template(model_entry):
        warn_unused_template(tokenizer, model_entry, model_name)
        return prompt
    key = f"models.{model_name}.chat_template"
    template = _template_text(model_name, model_entry["chat_template"])
    if template is None and not getattr(tokenizer, "chat_template", None):
        raise ConfigError(f"{key}: true, but the tokenizer of {model_name!r} has no chat template of its own")
    messages = []
    if model_entry.get("system_prompt"):
        messages.append({"role": "system", "content": model_entry["system_prompt"]})
    messages.append({"role": "user", "content": prompt})
    try:
        rendered = tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, chat_template=template
        )
    except Exception as error:  # jinja2's TemplateError and whatever the template raises
        raise ConfigError(f"{key}: the chat template does not render ({type(error).__name__}: {error})") from error
    if not isinstance(rendered, str):
        raise ConfigError(f"{key}: the chat template rendered {type(rendered).__name__}, not text")
    return rendered


#: The metadata key under which a prompted benchmark's score file holds chat_provenance as JSON.
CHAT_METADATA_KEY = "lmbias.chat"


def chat_provenance(model_entry: Mapping, model_name: str) -> dict[str, str]:
    """What a prompted benchmark's scores or generations record of the chat template: whether one was applied,
    which (the tokenizer's own, or the sha256 of the template text) and the system prompt."""
    if not uses_chat_template(model_entry):
        return {"chat_template": "none"}
    template = _template_text(model_name, model_entry["chat_template"])
    which = "tokenizer" if template is None else "sha256:" + hashlib.sha256(template.encode()).hexdigest()
    return {"chat_template": which, "system_prompt": str(model_entry.get("system_prompt") or "")}
