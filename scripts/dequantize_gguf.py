"""Rules dequantize_gguf and fetch_gguf_file: a GGUF entry's file dequantized into output[0], or its hub file
fetched into output[0] (lmbias.engine.gguf, lmbias.engine.hub)."""

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

from lmbias.errors import LmbiasError  # noqa: E402

model = snakemake.wildcards.model  # noqa: F821
try:
    if snakemake.rule == "fetch_gguf_file":  # noqa: F821
        from lmbias.engine.gguf import gguf_source
        from lmbias.engine.hub import fetch_hub_file

        source = gguf_source(model, {"gguf": dict(snakemake.params.gguf)})  # noqa: F821
        fetch_hub_file(source.key, source.hub_id, source.revision, source.file, source.sha256, snakemake.output[0])  # noqa: F821
    else:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # dequantizing reads local files only
        from lmbias.engine.gguf import dequantize_gguf

        files = list(snakemake.input.gguf)  # noqa: F821
        entry = dict(snakemake.params.entry)  # noqa: F821
        if "hub_id" in entry["gguf"]:  # the folder fetch_gguf_file downloaded the file into
            files = [str(Path(files[0]) / entry["gguf"]["file"])]
        dequantize_gguf(model, entry, snakemake.output[0], files=files)  # noqa: F821
except LmbiasError as error:  # named (config key, file, sha256): shown on the console too, not only in the log
    logging.error("%s", error)
    print(f"{type(error).__name__}: {error}", file=sys.__stderr__, flush=True)
    sys.exit(1)
