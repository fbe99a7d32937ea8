"""Errors that name what was wrong and where (file, line, config key)."""


class LmbiasError(Exception):
    """Base class: every error the library raises on bad input."""


class ConfigError(LmbiasError):
    """A config value is missing, unknown or of the wrong kind; the message names the key."""


class DataError(LmbiasError):
    """A data file is malformed, truncated or fails its checksum; the message names file and line."""

    def __init__(self, message: str, path=None, line: int | None = None):
        where = ""
        if path is not None:
            where = f"{path}"
            if line is not None:
                where += f":{line}"
            where += ": "
        super().__init__(where + message)
        self.path = path
        self.line = line


class TokenBudgetError(ConfigError):
    """An input is longer than the token budget of a forward pass (`max_tokens`); the message names the key and
    the input's length."""


class ScoringOutOfMemoryError(LmbiasError):
    """A single input runs out of accelerator memory on its own, after the engine has halved its batches."""


class DeviceMapTrainingError(ConfigError):
    """A method that fine-tunes a model whose entry sets `device_map`: a dispatched model is for scoring only;
    a model larger than one GPU is fine-tuned sharded with FSDP (`training.distributed: fsdp`)."""


class DiskOffloadError(ConfigError):
    """A model's `device_map` puts weights on disk while its entry does not allow offload (`offload: true` or
    `offload_folder`): every forward pass would read them back from disk."""


class BenchmarksFailedError(LmbiasError):
    """Scoring a model's benchmarks in one job: one or more failed; the message names each with its score file
    and error (the others' score files are written, and a rerun scores only the failed ones)."""
