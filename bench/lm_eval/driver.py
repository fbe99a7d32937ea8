"""Runs inside bench/.venv-lm-eval: lm-eval's CrowS-Pairs gender task on a local CSV, timed in phases.

Usage: driver.py MODEL_DIR TASK_DIR OUT_JSON BATCH_SIZE LIMIT [REPEATS]  (LIMIT 0 = every gender pair)
The loglikelihood requests are timed in the evaluate call and then REPEATS - 1 more times on the same requests
(loglikelihood_s: the fastest; a shared machine's noise only ever adds time).
Writes the phases' seconds (process start = interpreter start + imports, as measured from the parent's
LMBIAS_BENCH_T0; model load; task load; loglikelihood requests; the whole evaluate call), lm-eval's metrics and
each pair's two log-likelihoods.
"""

import json
import os
import sys
import time

t_enter = time.time()
from importlib.metadata import version  # noqa: E402

import torch  # noqa: E402
from lm_eval.evaluator import evaluate  # noqa: E402
from lm_eval.models.huggingface import HFLM  # noqa: E402
from lm_eval.tasks import TaskManager, get_task_dict  # noqa: E402
from loglikelihood_timer import LoglikelihoodTimer  # noqa: E402 (beside this script)

t_imported = time.time()
model_dir, task_dir, out_json, batch_size, limit = (
    sys.argv[1],
    sys.argv[2],
    sys.argv[3],
    int(sys.argv[4]),
    int(sys.argv[5]),
)
repeats = int(sys.argv[6]) if len(sys.argv) > 6 else 1
torch.manual_seed(0)
t0 = time.perf_counter()
lm = HFLM(pretrained=model_dir, backend="causal", device="cpu", batch_size=batch_size, dtype="float32")
with torch.inference_mode():  # every weight read once, as the lmbias side does (a lazily mapped checkpoint)
    for p in lm.model.parameters():
        p.sum()
t_model = time.perf_counter() - t0

t0 = time.perf_counter()
tasks = get_task_dict(["crows_pairs_english_gender_local"], TaskManager(include_path=task_dir, include_defaults=False))
t_task = time.perf_counter() - t0

timer = LoglikelihoodTimer(lm)
t0 = time.perf_counter()
results = evaluate(lm=lm, task_dict=tasks, limit=limit or None, log_samples=True, bootstrap_iters=0)
t_eval = time.perf_counter() - t0
runs = timer.runs(repeats)

name = "crows_pairs_english_gender_local"
pairs = []
for sample in sorted(results["samples"][name], key=lambda s: s["doc_id"]):
    (ll_more, _), (ll_less, _) = [r[0] for r in sample["resps"]]
    pairs.append(
        {
            "sent_more": sample["doc"]["sent_more"],
            "sent_less": sample["doc"]["sent_less"],
            "ll_more": float(ll_more),
            "ll_less": float(ll_less),
        }
    )
metrics = {
    k.split(",")[0]: v
    for k, v in results["results"][name].items()
    if k.split(",")[0] in ("pct_stereotype", "likelihood_diff")
}
t_start = float(os.environ.get("LMBIAS_BENCH_T0", t_enter))
with open(out_json, "w") as handle:
    json.dump(
        {
            "lm_eval_version": version("lm-eval"),
            "torch": torch.__version__,
            "batch_size": batch_size,
            "process_start_s": t_imported - t_start,
            "model_load_s": t_model,
            "task_load_s": t_task,
            "loglikelihood_s": min(runs),
            "loglikelihood_runs_s": runs,
            "requests": timer.requests,
            "tokens": timer.tokens(),
            "evaluate_s": t_eval,
            "metrics": metrics,
            "pairs": pairs,
        },
        handle,
    )
