"""The source papers: their published numbers as data, the grid of our (model, method) pairs each reads, and
the tables and figures that set ours beside theirs."""
