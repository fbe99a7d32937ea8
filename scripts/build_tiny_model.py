"""Rule build_tiny_model: build one tiny model (config entry in params.entry) into output[0]."""

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
# Building never needs the hub; keep the log free of progress bars.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

from lmbias.engine.tiny import build_from_config  # noqa: E402

build_from_config(
    snakemake.wildcards.model,  # noqa: F821
    dict(snakemake.params.entry),  # noqa: F821
    snakemake.output[0],  # noqa: F821
    words=snakemake.input.words,  # noqa: F821
)
