"""Fine-tuning (CDS/CDA/ER/GPR objectives through one Accelerate trainer) and SentenceDebias fitting."""
