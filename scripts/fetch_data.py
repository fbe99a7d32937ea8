"""Rule data_<dataset>: fetch (or copy from a local folder) one raw file and verify its sha256."""

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # the library of this checkout

sys.stderr = open(snakemake.log[0], "w")  # noqa: F821 (snakemake is injected)
logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

from lmbias.parsers.sources import fetch_params, obtain  # noqa: E402

# params.source is the file's content slice (name, sha256); where to read it from (data_dir, the dataset's
# path or its URL) is resolved from the run's config here, so that moving the data folder reruns nothing.
content = snakemake.params.source  # noqa: F821
config = snakemake.config  # noqa: F821
params = fetch_params(content["dataset"], content["file"], config["data"], config.get("data_dir"))
assert params["sha256"] == content["sha256"], (params, content)
logging.info("%s/%s from %s %s", params["dataset"], params["file"], params["source"], params["location"])
obtain(params, snakemake.output[0])  # noqa: F821
