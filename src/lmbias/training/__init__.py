"""Mitigation stage: fine-tuning debiased models (the trainer) and fitting SentenceDebias."""
