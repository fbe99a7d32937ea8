# Tiny models: built locally (random weights, fixed seed, tokenizer from resources/vocab/tiny_words.txt)
# so the whole DAG runs without the model hub. Hub models: fetched once by fetch_hub_model, a localrule (on a
# cluster only the submit host reaches the hub), into <models_dir>/{model}; every job that loads one has that
# folder as an input and reads it offline.

from lmbias.config import hub_model_folder as _models_hub_folder
from lmbias.config import hub_model_pattern as _hub_model_pattern
from lmbias.config import tiny_model_pattern as _tiny_model_pattern
from lmbias.config import gguf_file_folder as _gguf_file_folder
from lmbias.config import gguf_model_pattern as _gguf_model_pattern
from lmbias.workflow import inputs as _models_inputs


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


# GGUF entries (models.<name>.gguf; lmbias.engine.gguf): the file is checked (sha256, GGUF magic, an architecture
# transformers reads) and dequantized once into resources/models/{model}, the folder every job of the model loads.
# A file on the hub is fetched first, by fetch_gguf_file (a localrule, as fetch_hub_model).
rule dequantize_gguf:
    input:
        unpack(lambda wildcards: _models_inputs.gguf_inputs(config, wildcards.model)),
    output:
        directory("resources/models/{model}"),
    log:
        "logs/models/{model}.log",
    benchmark:
        "benchmarks/models/{model}.tsv"
    wildcard_constraints:
        model=_gguf_model_pattern(config.get("models", {})),
    conda:
        "../envs/lmbias.yaml"
    threads: 2
    resources:
        # the float32 weights twice (read, then copied into a savable model): about 8 x 2 bytes per 4-bit weight
        mem_mb=lambda wildcards, input: max(2000, int(20 * input.size_mb)),
        runtime=60,
    params:
        # Only what dequantizing reads: editing the model's scoring keys, or another model, rebuilds nothing.
        entry=lambda wildcards: {k: config["models"][wildcards.model][k] for k in ("gguf", "family")},
    script:
        "../scripts/dequantize_gguf.py"


rule fetch_gguf_file:
    output:
        directory(_gguf_file_folder("{model}")),
    log:
        "logs/models/{model}.gguf.log",
    wildcard_constraints:
        model=_gguf_model_pattern(config.get("models", {}), hub=True),
    localrule: True
    conda:
        "../envs/lmbias.yaml"
    params:
        gguf=lambda wildcards: config["models"][wildcards.model]["gguf"],
    script:
        "../scripts/dequantize_gguf.py"
