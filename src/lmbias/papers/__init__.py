"""The source papers: their published numbers as data, and tables that set ours beside them."""
