"""Mitigation stage: fine-tuning debiased models (one Accelerate trainer) and fitting SentenceDebias and INLP."""
