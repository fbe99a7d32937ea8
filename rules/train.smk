# Mitigation: fine-tuning (cds, cda, er, gpr, dropout) and fitting (sd, inlp) a model from a corpus.
#
#   results/{model}/{method}/seed{seed}/model/    rule finetune              (lmbias.training.jobs.train_job)
#                                                 rule fit_sentence_debias   (lmbias.training.sentence_debias.fit_job)
#                                                 rule fit_inlp              (lmbias.training.inlp.fit_job)
#
# params are the resolved settings slice only (the method's `training` merged over models.<model>.training,
# with the objective implied by family and kind), so editing one method retrains that method only and
# editing a scoring option rescores without retraining. A method the model's family cannot run fails when
# the DAG is built (lmbias.methods.resolution.check_method_family). Checkpoints go beside the output
# (<output>.checkpoints), so a rerun of a killed job resumes.


rule finetune:
    input:
        unpack(method_job_inputs),
        script="scripts/train_model.py",
    output:
        directory("results/{model}/{method}/seed{seed}/model"),
    log:
        "logs/{model}/{method}/seed{seed}/train.log",
    benchmark:
        "benchmarks/{model}/{method}/seed{seed}/train.tsv"
    wildcard_constraints:
        method=constraints.methods_of_kinds(config, resolution.TRAINED_METHOD_KINDS),
    conda:
        "../envs/lmbias.yaml"
    threads: 2
    resources:
        # gpu > 1 (profiles/slurm set-resources): `accelerate launch` with that many processes.
        gpu=1,
        mem_mb=16000,
        runtime=24 * 60,
    params:
        settings=method_settings,
        model=training_model_entry,
    script:
        "../scripts/train_model.py"


rule fit_sentence_debias:
    input:
        unpack(method_job_inputs),
        unpack(sd_pair_files),
        script="scripts/fit_sentence_debias.py",
    output:
        directory("results/{model}/{method}/seed{seed}/model"),
    log:
        "logs/{model}/{method}/seed{seed}/fit_sentence_debias.log",
    benchmark:
        "benchmarks/{model}/{method}/seed{seed}/fit_sentence_debias.tsv"
    wildcard_constraints:
        method=constraints.methods_of_kinds(config, {"sd"}),
        seed="0",
    conda:
        "../envs/lmbias.yaml"
    threads: 2
    resources:
        gpu=1,
        max_tokens=scoring_max_tokens,  # the embeddings' forward passes (models.<model>.max_tokens)
        mem_mb=16000,
        runtime=4 * 60,
    params:
        settings=method_sd_settings,
        model=fitting_model_entry,
    script:
        "../scripts/fit_sentence_debias.py"


rule fit_inlp:
    input:
        unpack(method_job_inputs),
        script="scripts/fit_inlp.py",
    output:
        directory("results/{model}/{method}/seed{seed}/model"),
    log:
        "logs/{model}/{method}/seed{seed}/fit_inlp.log",
    benchmark:
        "benchmarks/{model}/{method}/seed{seed}/fit_inlp.tsv"
    wildcard_constraints:
        method=constraints.methods_of_kinds(config, {"inlp"}),
        seed="0",
    conda:
        "../envs/lmbias.yaml"
    threads: 2
    resources:
        gpu=1,
        max_tokens=scoring_max_tokens,  # the embeddings' forward passes (models.<model>.max_tokens)
        mem_mb=16000,
        runtime=4 * 60,
    params:
        settings=method_inlp_settings,
        model=fitting_model_entry,
    script:
        "../scripts/fit_inlp.py"
