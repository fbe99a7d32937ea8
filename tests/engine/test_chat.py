"""lmbias.engine.chat: a prompt wrapped in a chat template (the tokenizer's, a string or a file), its provenance,
named errors for a template that does not render or a tokenizer without one, and one warning when the tokenizer's
own template goes unused."""

from __future__ import annotations

import logging

import pytest
from transformers import AutoTokenizer

from lmbias.engine.chat import chat_provenance, uses_chat_template, wrap_prompt
from lmbias.engine.tiny import build_tiny_model
from lmbias.errors import ConfigError

TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("chat") / "llama"
    build_tiny_model("llama", out, seed=0)
    return out


@pytest.fixture(scope="module")
def tokenizer(llama_dir):
    return AutoTokenizer.from_pretrained(llama_dir)


def test_no_template_leaves_the_prompt(tokenizer):
    assert not uses_chat_template({}) and not uses_chat_template({"chat_template": False})
    assert wrap_prompt("Hi there", tokenizer, {}, "m") == "Hi there"
    assert chat_provenance({}, "m") == {"chat_template": "none"}


def test_template_string_renders_user_turn_and_generation_prompt(tokenizer):
    entry = {"chat_template": TEMPLATE}
    assert wrap_prompt("Hi there", tokenizer, entry, "m") == "<|user|>\nHi there\n<|assistant|>\n"
    provenance = chat_provenance(entry, "m")
    assert provenance["chat_template"].startswith("sha256:") and provenance["system_prompt"] == ""


def test_system_prompt_comes_first(tokenizer):
    entry = {"chat_template": TEMPLATE, "system_prompt": "Be brief."}
    assert wrap_prompt("Q", tokenizer, entry, "m") == "<|system|>\nBe brief.\n<|user|>\nQ\n<|assistant|>\n"
    assert chat_provenance(entry, "m")["system_prompt"] == "Be brief."


def test_template_file(tokenizer, tmp_path):
    path = tmp_path / "chat.jinja"
    path.write_text(TEMPLATE)
    entry = {"chat_template": str(path)}
    assert wrap_prompt("Q", tokenizer, entry, "m") == "<|user|>\nQ\n<|assistant|>\n"
    assert chat_provenance(entry, "m") == chat_provenance({"chat_template": TEMPLATE}, "m")
    with pytest.raises(ConfigError, match=r"models\.m\.chat_template: template file .* does not exist"):
        wrap_prompt("Q", tokenizer, {"chat_template": str(tmp_path / "missing.jinja")}, "m")


def test_template_that_fails_to_render_is_named(tokenizer):
    broken = "{% for m in messages %}{{ m['content'] | no_such_filter }}{% endfor %}"
    with pytest.raises(ConfigError, match=r"models\.m\.chat_template: the chat template does not render"):
        wrap_prompt("Q", tokenizer, {"chat_template": broken}, "m")
    raising = "{{ raise_exception('no system turn here') }}"
    with pytest.raises(ConfigError, match="no system turn here"):
        wrap_prompt("Q", tokenizer, {"chat_template": raising}, "m")


def test_true_uses_the_tokenizers_own_template(tokenizer):
    assert not getattr(tokenizer, "chat_template", None)
    with pytest.raises(ConfigError, match=r"models\.m\.chat_template: true, but the tokenizer of 'm' has no chat"):
        wrap_prompt("Q", tokenizer, {"chat_template": True}, "m")
    tokenizer.chat_template = TEMPLATE
    try:
        assert wrap_prompt("Q", tokenizer, {"chat_template": True}, "m") == "<|user|>\nQ\n<|assistant|>\n"
        assert chat_provenance({"chat_template": True}, "m")["chat_template"] == "tokenizer"
    finally:
        tokenizer.chat_template = None


@pytest.mark.parametrize("setting", [1, "", "   "])
def test_bad_setting_is_named(tokenizer, setting):
    with pytest.raises(ConfigError, match=r"models\.m\.chat_template: expected true"):
        wrap_prompt("Q", tokenizer, {"chat_template": setting}, "m")


def _fresh(llama_dir, template):
    """A tokenizer object of its own (the warning is once per tokenizer), with `template` as its own."""
    tok = AutoTokenizer.from_pretrained(llama_dir)
    tok.chat_template = template
    return tok


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name == "lmbias.engine.chat"]


def test_an_unused_template_of_the_tokenizer_is_warned_once(llama_dir, caplog):
    tok = _fresh(llama_dir, TEMPLATE)
    with caplog.at_level(logging.WARNING, logger="lmbias.engine.chat"):
        assert [wrap_prompt(f"Q{k}", tok, {"family": "clm"}, "instruct") for k in range(3)] == ["Q0", "Q1", "Q2"]
    (message,) = _warnings(caplog)
    assert "models.instruct.chat_template is unset" in message and "models.instruct.chat_template: true" in message
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lmbias.engine.chat"):  # another model's tokenizer: its own warning
        wrap_prompt("Q", _fresh(llama_dir, TEMPLATE), {}, "other")
    assert len(_warnings(caplog)) == 1 and "models.other.chat_template" in caplog.text


@pytest.mark.parametrize(
    ("template", "entry"),
    [
        (TEMPLATE, {"chat_template": True}),  # the entry uses it
        (TEMPLATE, {"chat_template": TEMPLATE}),  # a template of the entry's own
        (TEMPLATE, {"chat_template": False}),  # raw prompts on purpose
        (None, {}),  # the tokenizer has none
    ],
)
def test_no_warning_when_the_template_is_used_refused_or_absent(llama_dir, caplog, template, entry):
    with caplog.at_level(logging.WARNING, logger="lmbias.engine.chat"):
        wrap_prompt("Q", _fresh(llama_dir, template), entry, "m")
    assert _warnings(caplog) == []
