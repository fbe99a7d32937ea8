"""Runs inside bench/.venv-lm-eval: lm-eval's `bbq` task (multiple choice) on a local jsonl, timed in phases.

Usage: bbq_driver.py MODEL_DIR TASK_DIR OUT_JSON BATCH_SIZE [REPEATS] [CHAT]
bench/lm_eval/driver.py (CrowS-Pairs) for the task `bbq_local` of TASK_DIR (bench/lm_eval/bbq_local.yaml filled
in). The loglikelihood requests are timed in the evaluate call and then REPEATS - 1 more times on the same requests
(loglikelihood_s: the fastest). Writes the phases' seconds (process start from the parent's LMBIAS_BENCH_T0, model
load, task load, loglikelihood requests, the whole evaluate call), what the model read in the evaluate call
(forward passes, rows and tokens, padding included, counted by a forward pre-hook), lm-eval's five overall metrics
and, per question (by example_id), the twelve choices' log-likelihoods and lm-eval's biased answers (indices of its
choices, doc_to_biased_answer). CHAT: 1 = --apply_chat_template (the tokenizer's own template).
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
from lm_eval.tasks.bbq.utils import doc_to_biased_answer  # noqa: E402
from loglikelihood_timer import LoglikelihoodTimer  # noqa: E402 (beside this script)

t_imported = time.time()
TASK = "bbq_local"
METRICS = ("acc", "accuracy_amb", "accuracy_disamb", "amb_bias_score", "disamb_bias_score")
model_dir, task_dir, out_json, batch_size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
repeats = int(sys.argv[5]) if len(sys.argv) > 5 else 1
chat = len(sys.argv) > 6 and sys.argv[6] == "1"
torch.manual_seed(0)
t0 = time.perf_counter()
lm = HFLM(pretrained=model_dir, backend="causal", device="cpu", batch_size=batch_size, dtype="float32")
with torch.inference_mode():  # every weight read once, as the lmbias side does (a lazily mapped checkpoint)
    for p in lm.model.parameters():
        p.sum()
t_model = time.perf_counter() - t0

t0 = time.perf_counter()
tasks = get_task_dict([TASK], TaskManager(include_path=task_dir, include_defaults=False))
t_task = time.perf_counter() - t0

read = {"passes": 0, "rows": 0, "tokens": 0, "counting": True}


def count_input(module, args, kwargs):
    ids = args[0] if args else kwargs["input_ids"]
    if read["counting"]:
        read["passes"] += 1
        read["rows"] += ids.shape[0]
        read["tokens"] += ids.numel()


lm.model.register_forward_pre_hook(count_input, with_kwargs=True)
timer = LoglikelihoodTimer(lm)
t0 = time.perf_counter()
results = evaluate(lm=lm, task_dict=tasks, log_samples=True, bootstrap_iters=0, apply_chat_template=chat)
t_eval = time.perf_counter() - t0
read["counting"] = False
runs = timer.runs(repeats)

questions = {}
for sample in results["samples"][TASK]:
    questions[int(sample["doc"]["example_id"])] = {
        "ll": [float(r[0][0]) for r in sample["resps"]],
        "biased": doc_to_biased_answer(sample["doc"]),
    }
metrics = {m: results["results"][TASK][f"{m},none"] for m in METRICS}
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
            "read": {k: v for k, v in read.items() if k != "counting"},
            "evaluate_s": t_eval,
            "metrics": metrics,
            "questions": questions,
        },
        handle,
    )
