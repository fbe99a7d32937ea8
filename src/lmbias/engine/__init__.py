"""Model engine: loading (hub, local, tiny) models and every batched forward pass the benchmarks need."""
