"""The four papers' tables and figures rebuilt from our runs, side by side with their published numbers."""
