# Tiny models: built locally (random weights, fixed seed, tokenizer from resources/vocab/tiny_words.txt)
# so the whole DAG runs without the model hub. Hub models need no rule: lmbias.engine.models.load_model reads them.

from lmbias.config import tiny_model_pattern as _tiny_model_pattern


rule build_tiny_model:
    input:
        words="resources/vocab/tiny_words.txt",
        script="scripts/build_tiny_model.py",
        lib="src/lmbias/engine/tiny.py",
    output:
        directory("resources/models/{model}"),
    params:
        # Only what building reads (the tiny block and the family): editing another model, or this model's
        # scoring precision, does not rebuild it.
        entry=lambda wildcards: {k: config["models"][wildcards.model][k] for k in ("tiny", "family")},
    conda:
        "../envs/lmbias.yaml"
    log:
        "logs/models/{model}.log",
    benchmark:
        "benchmarks/models/{model}.tsv"
    wildcard_constraints:
        model=_tiny_model_pattern(config.get("models", {})),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/build_tiny_model.py"
