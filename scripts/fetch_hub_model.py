"""Rules fetch_hub_model and fetch_hub_scorer: download one hub model (or scorer) at its revision into output[0]
(lmbias.engine.hub)."""

import logging
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # the library of this checkout

log_file = open(snakemake.log[0], "w", buffering=1)  # noqa: F821 (snakemake is injected)
sys.stderr = log_file
logging.basicConfig(
    stream=log_file, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True
)
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # keep the log readable

from lmbias.engine.hub import fetch_hub_model  # noqa: E402
from lmbias.errors import LmbiasError  # noqa: E402

try:
    scorer = getattr(snakemake.wildcards, "scorer", None)  # noqa: F821 (rule fetch_hub_scorer)
    name = f"scorers/{scorer}" if scorer else snakemake.wildcards.model  # noqa: F821
    key = f"scorers.{scorer}" if scorer else None
    fetch_hub_model(name, dict(snakemake.params.entry), snakemake.output[0], key=key)  # noqa: F821
except LmbiasError as error:  # named (config key, hub id, commit): shown on the console too, not only in the log
    logging.error("%s", error)
    print(f"{type(error).__name__}: {error}", file=sys.__stderr__, flush=True)
    sys.exit(1)
