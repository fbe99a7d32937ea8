"""lmbias.engine.chat: a prompt wrapped in a chat template (the tokenizer's, a string or a file), its provenance,
and named errors for a template that does not render or a tokenizer without one."""

from __future__ import annotations

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
def tokenizer(tmp_path_factory):
    out = tmp_path_factory.mktemp("chat") / "llama"
    build_tiny_model("llama", out, seed=0)
    return AutoTokenizer.from_pretrained(out)


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
