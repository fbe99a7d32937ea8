"""The local task's functions: lm-eval's own (lm_eval/tasks/crows_pairs/utils.py of the installed package)."""

from lm_eval.tasks.crows_pairs.utils import doc_to_choice, filter_gender, process_results  # noqa: F401
