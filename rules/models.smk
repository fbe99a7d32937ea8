# Tiny models: built locally (random weights, fixed seed, tokenizer from resources/vocab/tiny_words.txt)
# so the whole DAG runs without the model hub. Hub models: fetched once by fetch_hub_model, a localrule (on a
# cluster only the submit host reaches the hub), into <models_dir>/{model}; every job that loads one has that
# folder as an input and reads it offline.

from lmbias.config import hub_model_folder as _models_hub_folder
from lmbias.config import hub_model_pattern as _hub_model_pattern
from lmbias.config import tiny_model_pattern as _tiny_model_pattern


rule build_tiny_model:
    input:
        words="resources/vocab/tiny_words.txt",
        script="scripts/build_tiny_model.py",
        lib=[f"src/lmbias/engine/{m}.py" for m in ("tiny", "tiny_vocab", "planted_bias")],
    output:
        directory("resources/models/{model}"),
    log:
        "logs/models/{model}.log",
    benchmark:
        "benchmarks/models/{model}.tsv"
    wildcard_constraints:
        model=_tiny_model_pattern(config.get("models", {})),
    conda:
        "../envs/lmbias.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        # Only what building reads (the tiny block and the family): editing another model, or this model's
        # scoring precision, does not rebuild it.
        entry=lambda wildcards: {k: config["models"][wildcards.model][k] for k in ("tiny", "family")},
    script:
        "../scripts/build_tiny_model.py"


rule fetch_hub_model:
    output:
        directory(_models_hub_folder(config, "{model}")),
    log:
        "logs/models/{model}.log",
    wildcard_constraints:
        model=_hub_model_pattern(config.get("models", {})),
    localrule: True
    conda:
        "../envs/lmbias.yaml"
    params:
        # Only what fetching reads: a new hub_id, revision or allow_pickle fetches again, nothing else does.
        entry=lambda wildcards: {
            k: v for k, v in config["models"][wildcards.model].items() if k in ("hub_id", "revision", "allow_pickle")
        },
    script:
        "../scripts/fetch_hub_model.py"
