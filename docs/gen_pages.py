"""Pages generated when the docs are built (mkdocs-gen-files; mkdocs.yml lists this script).

- reference/configuration.md: every key of config.yaml, from the descriptions in schemas/config.schema.yaml.
- reference/api/...: one page per module found by walking src/lmbias (no hand-kept module list, so a module
  added, split or renamed is documented as it is), read statically by mkdocstrings (griffe: nothing imported),
  with reference/api/SUMMARY.md as the section's navigation (mkdocs-literate-nav).
"""

import sys
from pathlib import Path

import mkdocs_gen_files

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
sys.path.insert(0, str(SRC))  # this checkout's lmbias, whatever is installed

from lmbias.docs_schema import load_schema, render_reference  # noqa: E402

with mkdocs_gen_files.open("reference/configuration.md", "w") as page:
    page.write(render_reference(load_schema(ROOT / "schemas" / "config.schema.yaml")))
mkdocs_gen_files.set_edit_path("reference/configuration.md", Path("..") / "schemas" / "config.schema.yaml")

nav = mkdocs_gen_files.Nav()
for source in sorted((SRC / "lmbias").rglob("*.py")):
    module = source.relative_to(SRC).with_suffix("")
    parts = module.parts
    if parts[-1] == "__main__":
        continue
    page = Path("reference", "api", *parts).with_suffix(".md")
    if parts[-1] == "__init__":
        parts = parts[:-1]
        page = Path("reference", "api", *parts, "index.md")
    nav[parts] = page.relative_to("reference/api").as_posix()
    with mkdocs_gen_files.open(page, "w") as out:
        out.write(f"# `{'.'.join(parts)}`\n\n::: {'.'.join(parts)}\n")
    mkdocs_gen_files.set_edit_path(page, Path("..") / source.relative_to(ROOT))

with mkdocs_gen_files.open("reference/api/SUMMARY.md", "w") as summary:
    summary.writelines(nav.build_literate_nav())
