"""The `lmbias` command line: one argparse sub-command per task.

Adding a sub-command: write a function ``register(subparsers)`` that calls ``subparsers.add_parser(...)``,
adds its arguments and ``set_defaults(func=<callable(args) -> int exit status>)``, and append it to
COMMANDS below. Exit status: 0 success, 2 bad input or configuration (LmbiasError, usage errors), 1 other.
"""

from __future__ import annotations

import argparse
import logging
import sys

from lmbias import __version__
from lmbias.errors import LmbiasError

log = logging.getLogger("lmbias.cli")


class InputError(LmbiasError):
    """Unusable command input (e.g. bytes that are not UTF-8); the message names the line."""


# ------------------------------------------------------------------------------------ counterfactual

COUNTERFACTUAL_HELP = """\
Read one text per line from standard input (UTF-8) and write the counterfactual of each line to standard
output: the same number of lines in the same order. Empty and whitespace-only lines pass through as they
are. Each line is one document: with --names a name is swapped to the same partner everywhere in the line.
A line longer than 100,000 characters (spaCy refuses texts over 1,000,000) is swapped in pieces cut after
sentence ends; the pieces stay one document, so names are swapped consistently across them.
Input that is not valid UTF-8 stops the command before anything is written, with exit status 2 and a
message naming the line.

grammatical (Lu et al.): pronouns decided by spaCy tags (her -> him/his, his -> her/hers), verbs and
gendered words inside proper names ("Queen Elizabeth", "Prince Street") kept. naive: the dictionary only
(her -> his always; the paper's baseline, with its known error). See lmbias.corpora.counterfactual.
"""


def _read_lines(stream) -> tuple[list[str], list[str], bool]:
    """(texts, line endings, ends with a newline) of a byte stream; InputError naming a non-UTF-8 line."""
    data = stream.read()
    trailing = data.endswith(b"\n")
    raw_lines = data.split(b"\n")
    if trailing or not data:
        raw_lines.pop()
    texts, endings = [], []
    for lineno, raw in enumerate(raw_lines, start=1):
        ending = ""
        if raw.endswith(b"\r"):
            raw, ending = raw[:-1], "\r"
        try:
            texts.append(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise InputError(
                f"standard input line {lineno}: not valid UTF-8 (byte 0x{raw[exc.start]:02x} at "
                f"byte offset {exc.start + 1} of the line: {exc.reason})"
            ) from None
        endings.append(ending)
    return texts, endings, trailing


def run_counterfactual(args) -> int:
    from lmbias.corpora.counterfactual import Swapper, swap_lines
    from lmbias.corpora.swap_lexicon import load_lexicon

    texts, endings, trailing = _read_lines(sys.stdin.buffer)
    lexicon = load_lexicon(cds_pairs=args.cds_pairs, winobias_dir=args.winobias_dir, names=args.names_file)
    # the spaCy pipeline is loaded on first use (not at all when every line is empty)
    swapper = Swapper(lexicon, intervention=args.intervention, names=args.names, spacy_model=args.spacy_model)
    todo = [i for i, t in enumerate(texts) if t.strip()]
    out = list(texts)
    # lines longer than spaCy's max_length are swapped in pieces cut at sentence ends (one document each)
    for i, swapped in zip(todo, swap_lines(swapper, [texts[i] for i in todo], batch_size=args.batch_size)):
        out[i] = swapped
    body = "\n".join(t + e for t, e in zip(out, endings)) + ("\n" if trailing else "")
    sys.stdout.buffer.write(body.encode("utf-8"))
    sys.stdout.buffer.flush()
    log.info(
        "counterfactual (%s%s): %d lines in, %d lines out, %d changed, %d empty passed through",
        args.intervention,
        "+names" if args.names else "",
        len(texts),
        len(out),
        swapper.changed_count,
        len(texts) - len(todo),
    )
    return 0


def register_counterfactual(subparsers) -> None:
    p = subparsers.add_parser(
        "counterfactual",
        help="swap gender in text read line by line from stdin",
        description=COUNTERFACTUAL_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--intervention",
        choices=("grammatical", "naive"),
        default="grammatical",
        help="grammatical (POS-aware, default) or naive (dictionary only)",
    )
    p.add_argument(
        "--names", action="store_true", help="also swap person names found in the name-pair list (needs --names-file)"
    )
    p.add_argument("--cds-pairs", metavar="PATH", help="CDS word pair list (cda_default_pairs.json) to add")
    p.add_argument(
        "--winobias-dir",
        metavar="DIR",
        help="folder with WinoBias generalized_swaps.txt and extra_gendered_words.txt to add",
    )
    p.add_argument("--names-file", metavar="PATH", help="CDS name pair list (names_pairs_1000_scaled.json)")
    p.add_argument(
        "--spacy-model",
        metavar="NAME",
        default="en_core_web_sm",
        help="spaCy pipeline for grammatical/--names (default en_core_web_sm)",
    )
    p.add_argument("--batch-size", type=int, default=256, metavar="N", help="spaCy batch size (default 256)")
    p.set_defaults(func=run_counterfactual, _parser=p)


def _validate_counterfactual(args) -> None:
    if args.names and not args.names_file:
        args._parser.error("--names needs --names-file (the CDS name pair list)")
    if args.batch_size < 1:
        args._parser.error("--batch-size must be at least 1")


# ------------------------------------------------------------------------------------------- score

SCORE_HELP = """\
Score the benchmarks of a job description (a JSON file, lmbias.jobs.description.ScoringJob: a model, its method, and one
or more benchmarks with their items and score files) with the model loaded once per process. Run plainly it is
one process; run under `accelerate launch --num_processes N -m lmbias.cli score --job FILE` (what the scoring
rules start for resources.gpu > 1) each process scores a contiguous shard of each row-local benchmark's items
and the main process writes the gathered tables (lmbias.jobs.sharded).
"""


def _json_arg(text: str):
    import json

    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object")
    return value


def run_score(args) -> int:
    from lmbias.jobs.description import ScoringJob
    from lmbias.jobs.model_scoring import score_launched

    score_launched(ScoringJob.read(args.job))
    return 0


def register_score(subparsers) -> None:
    p = subparsers.add_parser(
        "score",
        help="per-item scores of a job's benchmarks (multi-process under accelerate)",
        description=SCORE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--job",
        metavar="FILE",
        required=True,
        help="a job description (JSON) of one or more benchmarks (lmbias.jobs.description.ScoringJob)",
    )
    p.set_defaults(func=run_score, _parser=p)


# ------------------------------------------------------------------------------------------- train

TRAIN_HELP = """\
Fine-tune one model on one corpus (lmbias.training.jobs.train_job): writes the model folder atomically
(safetensors, tokenizer, train_log.parquet, training.json); checkpoints beside it resume a killed run.
Run plainly it is one process; under `accelerate launch --num_processes N -m lmbias.cli train ...` it is
data-parallel with the same global batches as one process with N times the batch size.
"""


def run_train(args) -> int:
    from lmbias.training.jobs import train_job

    train_job(
        args.model_entry,
        args.model_name,
        args.corpus,
        args.out,
        args.seed,
        args.settings,
        checkpoint_dir=args.checkpoint_dir,
    )
    return 0


def register_train(subparsers) -> None:
    p = subparsers.add_parser(
        "train",
        help="fine-tune a model (multi-process under accelerate)",
        description=TRAIN_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model-name", required=True, metavar="NAME", help="model name (config models.<name>)")
    p.add_argument("--model-entry", required=True, type=_json_arg, metavar="JSON", help="config models.<name>")
    p.add_argument("--corpus", required=True, metavar="PATH", help="training corpus (parquet)")
    p.add_argument("--out", required=True, metavar="DIR", help="model folder to write")
    p.add_argument("--seed", required=True, type=int, metavar="N", help="training seed")
    p.add_argument("--settings", required=True, type=_json_arg, metavar="JSON", help="training settings")
    p.add_argument("--checkpoint-dir", metavar="DIR", help="checkpoint folder (default <out>.checkpoints)")
    p.set_defaults(func=run_train, _parser=p)


# ------------------------------------------------------------------------------------------- fit-sd

FIT_SD_HELP = """\
Fit SentenceDebias (Liang et al. 2020) for one model: the gender subspace from counterfactual pairs of the
sentences that contain a gendered word of the word-pair list, written to DIR as sentence_debias.safetensors
and sentence_debias.json. Settings (JSON): k, ratio_of_pairs, batch_size, max_length, limit_sentences,
text_column, application, pair_list, pair_selection, pair_matching, fit_pooling, pad_to, precision
(pair_list dagender needs --word-pairs and --name-pairs). See lmbias.training.sentence_debias.
"""


def run_fit_sd(args) -> int:
    from lmbias.engine.model_spec import model_spec
    from lmbias.training.sentence_debias import fit_job

    fit_job(
        model_spec(args.model_name, args.model_entry),
        args.sentences,
        args.out,
        args.settings,
        key=args.settings_key,
        pair_files={"words": args.word_pairs, "names": args.name_pairs},
    )
    return 0


def register_fit_sd(subparsers) -> None:
    p = subparsers.add_parser(
        "fit-sd",
        help="fit SentenceDebias's gender subspace for one model",
        description=FIT_SD_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model-name", required=True, metavar="NAME", help="model name (config models.<name>)")
    p.add_argument("--model-entry", required=True, type=_json_arg, metavar="JSON", help="config models.<name>")
    p.add_argument("--sentences", required=True, metavar="PATH", help="sentences parquet (column text)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder to write (replaced atomically)")
    p.add_argument("--settings", type=_json_arg, default={}, metavar="JSON", help="SentenceDebias settings")
    p.add_argument(
        "--settings-key",
        default="sd",
        metavar="KEY",
        help="config key the settings came from, named in errors (e.g. methods.sd)",
    )
    p.add_argument("--word-pairs", metavar="PATH", help="cda_default_pairs.json (dataset cds; pair_list dagender)")
    p.add_argument(
        "--name-pairs", metavar="PATH", help="names_pairs_1000_scaled.json (dataset cds; pair_list dagender)"
    )
    p.set_defaults(func=run_fit_sd, _parser=p)


# ------------------------------------------------------------------------------------------- bbq-items

BBQ_ITEMS_HELP = """\
Build BBQ's gender-identity items (Parrish et al. 2022; --subset race_x_gender: the Race_x_gender items) from the
authors' templates and vocabularies, as the authors' generators do but with a seed (lmbias.parsers.bbq): DIR holds
"new_templates - Gender_identity.csv" (or "new_templates - Race_x_gender.csv"), vocabulary.csv and
vocabulary_proper_names.csv (nyu-mll/BBQ templates/). Writes OUT as the released Gender_identity.jsonl's (or
Race_x_gender.jsonl's) fields, one item a line (atomically: no partial file on failure), and prints the count.
"""


def run_bbq_items(args) -> int:
    from pathlib import Path

    from lmbias.parsers.bbq import NAMES, SUBSET_BUILDS, SUBSET_FILES, VOCABULARY
    from lmbias.parsers.bbq_jsonl import write_jsonl

    files = (SUBSET_FILES[args.subset], VOCABULARY, NAMES)
    items = SUBSET_BUILDS[args.subset](*(Path(args.data_dir) / name for name in files), seed=args.seed)
    write_jsonl(items, args.out)
    print(f"{items.num_rows} items written to {args.out}")
    return 0


def register_bbq_items(subparsers) -> None:
    p = subparsers.add_parser(
        "bbq-items",
        help="build BBQ's gender-identity items from the authors' templates (jsonl)",
        description=BBQ_ITEMS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--data-dir", required=True, metavar="DIR", help="folder with the three csv files")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="seed of the draws (default 0)")
    p.add_argument(
        "--subset", choices=("gender", "race_x_gender"), default="gender", help="which template file (default gender)"
    )
    p.add_argument("out", metavar="OUT.jsonl", help="jsonl file to write")
    p.set_defaults(func=run_bbq_items, _parser=p)


def _validate_bbq_items(args) -> None:
    if args.seed < 0:
        args._parser.error("--seed must be a non-negative integer")


# ------------------------------------------------------------------------------------------- main

COMMANDS = [register_counterfactual, register_score, register_train, register_fit_sd, register_bbq_items]
VALIDATORS = {"counterfactual": _validate_counterfactual, "bbq-items": _validate_bbq_items}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lmbias", description="Measure and mitigate gender bias in language models.")
    parser.add_argument("--version", action="version", version=f"lmbias {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log progress (-v info, -vv debug)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for register in COMMANDS:
        register(subparsers)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING if args.verbose == 0 else logging.INFO if args.verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if args.command in VALIDATORS:
        VALIDATORS[args.command](args)
    try:
        return int(args.func(args) or 0)
    except LmbiasError as exc:
        print(f"lmbias {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 1


if __name__ == "__main__":
    sys.exit(main())
