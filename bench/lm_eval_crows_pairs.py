"""lm-evaluation-harness's CrowS-Pairs (English, gender) side by side with ours: same CSV, numbers and speed.

    .venv/bin/python bench/lm_eval_crows_pairs.py [--data-dir ../shared/data] [--timing-pairs 64]
        [--layers-1b 16] [--repeats 3] [--skip-timing]      (docs, performance: --timing-pairs 32, --layers-1b 16 and 4)

1. Installs lm-eval (pinned: LM_EVAL below) into its own virtual environment, bench/.venv-lm-eval (git-ignored;
   torch first so pip takes the local CPU build, transformers and accelerate at constraints.txt's pins), once.
2. Runs lm-eval's `crows_pairs_english_gender` task through a local task file (bench/lm_eval/: same
   doc_to_text "", choices [sent_more, sent_less], target 0, delimiter "", process_results and gender filter,
   all lm-eval's own functions; dataset_path: csv with data_files = the local crows_pairs_anonymized.csv, no
   hub) in that venv (bench/lm_eval/driver.py, which times its phases).
3. Scores the same pairs with lmbias (score_crows_pairs, default scoring: clm_context bos, batch_size 64) and
   reads them with `metric.variant: lm_eval` (and the default metric_score), then compares each sentence's
   log-likelihood (|ours - theirs| <= 1e-4) and the two metrics.

Numbers: tiny-gpt2 and tiny-llama (lmbias.engine.tiny, seed 0) on every gender pair.
Timing (--timing-pairs: the first N gender pairs, 2N sentences; both sides on the same ones, one after
the other in this run): randomly initialised models (seed 0) of
  * GPT-2's size: GPT2Config() defaults (12 layers, hidden 768, 124M parameters, vocabulary 50,257);
  * a 1B decoder's width: Llama-3.2-1B's shape (hidden 2048, intermediate 8192, 32 heads, 8 key/value heads,
    vocabulary 128,256, tied embeddings), --layers-1b of its 16 layers.
Both use the tiny model's tokenizer (its ids are a subset of the model's vocabulary): the sentences are tokenised
into more, shorter word pieces than GPT-2's or Llama-3's BPE would make, but the LM head costs the full
vocabulary, as in the real models. Their side runs at lm-eval's default batch size (1) and at ours (64).
Reported per side: process start (interpreter + imports), model load (weights read once: touch_weights), and the
scoring itself (lm-eval: its loglikelihood requests; lmbias: the score_crows_pairs call; the fastest of --repeats
runs on the same pairs), as pairs/s of the scoring.

Exit status 1 when a sentence's log-likelihood differs by more than 1e-4 (--tol) or a metric differs.
Real model folders (SmolLM2, Gemma 3): bench/lm_eval_real_models.py, which reuses these functions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def seconds_since_process_start() -> float:
    """Seconds since this process started (Linux /proc: its start and the uptime, both since boot, 0.01 s)."""
    ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
    return float(Path("/proc/uptime").read_text().split()[0]) - ticks / os.sysconf("SC_CLK_TCK")


ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / "bench" / ".venv-lm-eval"
TASK_SRC = ROOT / "bench" / "lm_eval"
LM_EVAL = "lm-eval[hf]==0.4.13"  # [hf]: accelerate and the other HFLM needs
TORCH = "torch==2.13.0"
TOL = 1e-4


def pinned(name: str) -> str:
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.lower().startswith(name.lower() + "=="):
            return line.strip()
    raise SystemExit(f"constraints.txt pins no {name}")


def ensure_venv() -> Path:
    python = VENV / "bin" / "python"
    marker = VENV / "lmbias-installed.txt"
    wanted = " ".join([TORCH, LM_EVAL, pinned("transformers"), pinned("accelerate")])
    if marker.is_file() and marker.read_text().strip() == wanted:
        return python
    if not python.is_file():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    subprocess.run(pip + [TORCH], check=True)  # first: the local CPU build
    subprocess.run(pip + [LM_EVAL, pinned("transformers"), pinned("accelerate")], check=True)
    marker.write_text(wanted + "\n")
    return python


def task_dir(csv: Path, where: Path) -> Path:
    out = where / "task"
    out.mkdir()
    yaml = (TASK_SRC / "crows_pairs_english_gender_local.yaml").read_text().replace("CSV_PATH", str(csv))
    (out / "crows_pairs_english_gender_local.yaml").write_text(yaml)
    (out / "utils.py").write_text((TASK_SRC / "utils.py").read_text())
    return out


def build_models(where: Path, layers_1b: int, timing: bool) -> dict[str, Path]:
    import torch
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    from lmbias.engine.tiny import build_tiny_model

    out = {}
    for arch in ("gpt2", "llama"):
        out[f"tiny-{arch}"] = build_tiny_model(arch, where / f"tiny-{arch}", seed=0)
    if not timing:
        return out
    shapes = {
        "gpt2-124M-random": (GPT2LMHeadModel, GPT2Config(), "tiny-gpt2"),
        f"llama-1B-width-{layers_1b}L-random": (
            LlamaForCausalLM,
            LlamaConfig(
                vocab_size=128256,
                hidden_size=2048,
                intermediate_size=8192,
                num_hidden_layers=layers_1b,
                num_attention_heads=32,
                num_key_value_heads=8,
                max_position_embeddings=8192,
                tie_word_embeddings=True,
                rope_theta=500000.0,
            ),
            "tiny-llama",
        ),
    }
    for name, (cls, config, tok_from) in shapes.items():
        tok = AutoTokenizer.from_pretrained(out[tok_from])
        config.bos_token_id, config.eos_token_id = tok.bos_token_id, tok.eos_token_id
        torch.manual_seed(0)
        model = cls(config)
        model.save_pretrained(where / name)
        tok.save_pretrained(where / name)
        out[name] = where / name
        del model
    return out


def run_driver(python: Path, driver: str, args: list, where: Path, model_name: str) -> None:
    """Run one of bench/lm_eval's drivers in lm-eval's venv, offline (no hub, datasets cached under `where`), with
    LMBIAS_BENCH_T0 set so the driver can time its own process start; a failure prints its output and stops."""
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_CACHE": str(where / "hf-datasets"),
        "TOKENIZERS_PARALLELISM": "false",
        "LMBIAS_BENCH_T0": repr(time.time()),
    }
    proc = subprocess.run(
        [str(python), str(TASK_SRC / driver), *map(str, args)], env=env, capture_output=True, text=True
    )
    if proc.returncode:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-8000:])
        raise SystemExit(f"lm-eval driver failed on {model_name} (exit {proc.returncode})")


def run_theirs(
    python: Path, model: Path, tasks: Path, where: Path, batch_size: int, limit: int, repeats: int = 1
) -> dict:
    out = where / f"lm_eval-{model.name}-bs{batch_size}.json"
    started = time.perf_counter()
    run_driver(python, "driver.py", [model, tasks, out, batch_size, limit, repeats], where, model.name)
    result = json.loads(out.read_text())
    result["wall_s"] = time.perf_counter() - started
    return result


def local_entry(model_dir: Path, chat_template: bool | None = None) -> dict:
    """The lmbias model entry of a local causal model folder: the tiny models' (chat_template None), or, for a real
    model, float32 weights and scoring (`dtype`, `precision`: fp32, as lm-eval's `dtype=float32`) with the chat
    template on or off."""
    entry = {"path": str(model_dir), "family": "clm", "revision": "local"}
    if chat_template is not None:
        entry.update(dtype="fp32", precision="fp32", chat_template=chat_template)
    return entry


def run_ours(model_dir: Path, items, repeats: int = 1, entry: dict | None = None) -> dict:
    from lmbias.benchmarks.crows_pairs import score_crows_pairs
    from lmbias.engine.lm import LanguageModel
    from lmbias.engine.model_spec import model_spec
    from lmbias.engine.models import load_model
    from lmbias.metrics.crows_pairs import CrowsPairsOptions, crows_pairs_metric_rows

    t0 = time.perf_counter()
    model, tok = load_model(model_spec(model_dir.name, entry or local_entry(model_dir)))
    touch_weights(model)
    load_s = time.perf_counter() - t0
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        scores = score_crows_pairs(items, LanguageModel(model, tok, "clm"), {"batch_size": 64})
        runs.append(time.perf_counter() - t0)
    score_s = min(runs)
    del model
    rows = crows_pairs_metric_rows(scores, CrowsPairsOptions(variant="lm_eval"))
    metrics = {r["metric"]: r["value"] for r in rows if r["subset"] == "all"}
    default = crows_pairs_metric_rows(scores, CrowsPairsOptions())
    metrics["metric_score"] = next(
        r["value"] for r in default if r["subset"] == "all" and r["metric"] == "metric_score"
    )
    return {
        "model_load_s": load_s,
        "score_s": score_s,
        "metrics": metrics,
        "pairs": [
            {"sent_more": s, "sent_less": t, "ll_more": a, "ll_less": b}
            for s, t, a, b in zip(
                items.column("sent_more").to_pylist(),
                items.column("sent_less").to_pylist(),
                scores.column("more_loglik").to_pylist(),
                scores.column("less_loglik").to_pylist(),
            )
        ],
    }


def touch_weights(model) -> None:
    """Read every weight once, so a lazily mapped checkpoint is in memory before the scoring is timed (both
    sides do this as part of their model load; the driver likewise)."""
    import torch

    with torch.inference_mode():
        for p in model.parameters():
            p.sum()


def compare(ours: dict, theirs: dict, tol: float = TOL) -> tuple[float, bool]:
    """(max |difference| over sentences, metrics equal: the same pct_stereotype, likelihood_diff within `tol`)."""
    if len(ours["pairs"]) != len(theirs["pairs"]):
        raise SystemExit(f"pair counts differ: lmbias {len(ours['pairs'])}, lm-eval {len(theirs['pairs'])}")
    worst = 0.0
    for a, b in zip(ours["pairs"], theirs["pairs"]):
        if (a["sent_more"], a["sent_less"]) != (b["sent_more"], b["sent_less"]):
            raise SystemExit(f"pairs in a different order or text: {a['sent_more'][:60]!r} vs {b['sent_more'][:60]!r}")
        worst = max(worst, abs(a["ll_more"] - b["ll_more"]), abs(a["ll_less"] - b["ll_less"]))
    same = (
        abs(ours["metrics"]["pct_stereotype"] - theirs["metrics"]["pct_stereotype"]) < 1e-12
        and abs(ours["metrics"]["likelihood_diff"] - theirs["metrics"]["likelihood_diff"]) < tol
    )
    return worst, same


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("LMBIAS_TEST_DATA", str(ROOT.parent / "shared" / "data")))
    ap.add_argument("--timing-pairs", type=int, default=64, help="gender pairs timed (the first N); 0 = all 262")
    ap.add_argument(
        "--layers-1b", type=int, default=16, help="layers of the 1B-width model (Llama-3.2-1B: 16; docs: 4)"
    )
    ap.add_argument("--skip-timing", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3, help="timed scoring runs per side (the fastest is reported)")
    ap.add_argument("--tol", type=float, default=TOL, help="largest |difference| of a log-likelihood, nats")
    args = ap.parse_args(argv)
    import torch

    import lmbias.benchmarks.crows_pairs  # noqa: F401  (what the scoring imports: part of our process start)
    import lmbias.engine.models  # noqa: F401
    from lmbias.parsers import parse_crows_pairs

    ours_start = seconds_since_process_start()  # interpreter start + imports
    torch.set_num_threads(args.threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # the lm-eval process inherits it
    csv = Path(args.data_dir) / "crows_pairs" / "crows_pairs_anonymized.csv"
    gender = parse_crows_pairs(csv, bias_types=["gender"])
    python = ensure_venv()
    failed = False
    with tempfile.TemporaryDirectory(prefix="lmeval-bench-") as tmp:
        where = Path(tmp)
        tasks = task_dir(csv, where)
        models = build_models(where, args.layers_1b, not args.skip_timing)
        print(
            f"lm-eval {LM_EVAL.split('==')[1].split()[0]} vs lmbias, CrowS-Pairs English gender, "
            f"{gender.num_rows} pairs "
            f"({csv}); torch threads {args.threads}"
        )
        print("\n## Numbers (every gender pair; lm-eval at batch size 1)\n")
        print(
            "| model | max abs diff per sentence | pct_stereotype lm-eval | lmbias lm_eval | "
            "likelihood_diff lm-eval | lmbias lm_eval | lmbias metric_score |"
        )
        print("|---|---|---|---|---|---|---|")
        for name in ("tiny-gpt2", "tiny-llama"):
            theirs = run_theirs(python, models[name], tasks, where, 1, 0)
            ours = run_ours(models[name], gender)
            worst, same = compare(ours, theirs, args.tol)
            failed |= worst > args.tol or not same
            print(
                f"| {name} | {worst:.2e} | {theirs['metrics']['pct_stereotype']:.4f} | "
                f"{ours['metrics']['pct_stereotype']:.4f} | {theirs['metrics']['likelihood_diff']:.6f} | "
                f"{ours['metrics']['likelihood_diff']:.6f} | {ours['metrics']['metric_score']:.2f} |"
            )
        if not args.skip_timing:
            n = args.timing_pairs or gender.num_rows
            items = gender.slice(0, n)
            print(
                f"\n## Speed ({n} pairs = {2 * n} sentences, CPU, {args.threads} threads; seconds; scoring: the "
                f"fastest of {args.repeats} runs)\n"
            )
            print("| model | side | process start | model load | scoring | pairs/s | speed-up | max abs diff |")
            print("|---|---|---|---|---|---|---|---|")
            for name in [m for m in models if not m.startswith("tiny-")]:
                ours = run_ours(models[name], items, args.repeats)
                ours_rate = n / ours["score_s"]
                print(
                    f"| {name} | lmbias (batch 64) | {ours_start:.1f} | {ours['model_load_s']:.1f} | "
                    f"{ours['score_s']:.1f} | {ours_rate:.2f} | | |",
                    flush=True,
                )
                for bs in (1, 64):
                    theirs = run_theirs(python, models[name], tasks, where, bs, n, args.repeats)
                    worst, same = compare(ours, theirs, args.tol)
                    failed |= worst > args.tol or not same
                    rate = n / theirs["loglikelihood_s"]
                    print(
                        f"| {name} | lm-eval (batch {bs}) | {theirs['process_start_s']:.1f} | "
                        f"{theirs['model_load_s']:.1f} | {theirs['loglikelihood_s']:.1f} | {rate:.2f} | "
                        f"{ours_rate / rate:.1f}x | {worst:.1e} |",
                        flush=True,
                    )
    print(
        "\nProcess start: interpreter start to the imports done (lmbias: torch + its scoring modules, from /proc; "
        " lm-eval: torch + lm_eval's evaluator, HFLM and tasks, from the launch). Scoring: "
        "lmbias's score_crows_pairs call; lm-eval's loglikelihood requests (its evaluate call, with building the "
        "requests and the metrics, is in the JSON). Speed-up: lmbias pairs/s over lm-eval's."
    )
    if failed:
        print("FAILED: a sentence's log-likelihood or a metric differs", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
