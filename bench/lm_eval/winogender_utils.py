"""The WinoGender local tasks' functions: lm-eval's own (lm_eval/tasks/winogender/utils.py of the installed package)."""

from lm_eval.tasks.winogender.utils import filter_female, filter_male, filter_neutral  # noqa: F401
