"""What several test modules share (workflow copies and Snakemake runs, small corpora, planted-bias models,
a loopback HTTP server, a throwaway Slurm). Test modules import from here, never from one another
(tests/project/test_test_layout.py checks that); pyproject's `pythonpath = ["tests"]` makes `helpers` importable."""
