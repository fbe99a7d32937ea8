"""MkDocs hook (mkdocs.yml `hooks:`): tokenizer tokens in docstrings are not cross-references.

Docstrings write special tokens in brackets ("He is an [MASK] [MASK].", "[SEP] [CLS]"), which Markdown reads as
reference links; mkdocs-autorefs then warns that it cannot find the target `MASK`, and `mkdocs build --strict`
fails. This drops exactly those warnings, so the sources keep their wording and every other unresolved
reference still fails the build.
"""

import logging
import re

SPECIAL_TOKENS = ("MASK", "CLS", "SEP", "PAD", "UNK", "PRONOUN", "BOS", "EOS")
_TOKEN_REFERENCE = re.compile(r"Could not find cross-reference target '({})'$".format("|".join(SPECIAL_TOKENS)))


class _SpecialTokenReferences(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not _TOKEN_REFERENCE.search(record.getMessage())


def on_startup(command: str, dirty: bool) -> None:
    logging.getLogger("mkdocs.plugins.mkdocs_autorefs._internal.plugin").addFilter(_SpecialTokenReferences())
