"""Runs inside bench/.venv-lm-eval: lm-eval's WinoGender tasks on local CSVs, timed.

Usage: winogender_driver.py MODEL_DIR TASK_DIR OUT_JSON BATCH_SIZE TASKS [CHAT] [SYSTEM]
TASKS: comma-separated local task names; CHAT: 1 = --apply_chat_template (the tokenizer's own template);
SYSTEM: --system_instruction. Writes lm-eval's acc per task, each sample's two log-likelihoods (per task, by
sentid) and the seconds of the loglikelihood requests.
"""

import json
import sys
from importlib.metadata import version

import torch
from lm_eval.evaluator import evaluate
from lm_eval.models.huggingface import HFLM
from lm_eval.tasks import TaskManager, get_task_dict
from loglikelihood_timer import LoglikelihoodTimer  # beside this script

model_dir, task_dir, out_json, batch_size, tasks = sys.argv[1:6]
chat = len(sys.argv) > 6 and sys.argv[6] == "1"
system = sys.argv[7] if len(sys.argv) > 7 and sys.argv[7] else None
torch.manual_seed(0)
lm = HFLM(pretrained=model_dir, backend="causal", device="cpu", batch_size=int(batch_size), dtype="float32")
with torch.inference_mode():  # every weight read once, as the lmbias side does
    for p in lm.model.parameters():
        p.sum()
task_dict = get_task_dict(tasks.split(","), TaskManager(include_path=task_dir, include_defaults=False))
timer = LoglikelihoodTimer(lm)
results = evaluate(
    lm=lm,
    task_dict=task_dict,
    log_samples=True,
    bootstrap_iters=0,
    apply_chat_template=chat,
    system_instruction=system,
)
out = {"lm_eval_version": version("lm-eval"), "batch_size": int(batch_size), "loglikelihood_s": timer.seconds}
out["requests"], out["tokens"] = timer.requests, timer.tokens()
out["acc"] = {t: results["results"][t]["acc,none"] for t in tasks.split(",")}
out["samples"] = {
    t: {
        s["doc"]["sentid"]: {
            "ll": [float(r[0][0]) for r in s["resps"]],
            "acc": float(s["acc"]),
        }
        for s in results["samples"][t]
    }
    for t in tasks.split(",")
}
with open(out_json, "w") as handle:
    json.dump(out, handle)
