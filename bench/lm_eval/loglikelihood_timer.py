"""Runs inside bench/.venv-lm-eval (no lmbias there): the time lm-eval spends in its model's loglikelihood
requests, which the drivers (driver.py, bbq_driver.py, winogender_driver.py) report as lm-eval's scoring time."""

import time


class LoglikelihoodTimer:
    """Stands in for `lm.loglikelihood`: calls it, adds up its seconds and requests, and keeps each call's
    requests so `rerun` can time the same requests again (the best of several runs, as lmbias's side is timed)."""

    def __init__(self, lm):
        self.lm = lm
        self.inner = lm.loglikelihood
        self.seconds = 0.0
        self.requests = 0
        self.calls = []
        lm.loglikelihood = self

    def __call__(self, requests, *args, **kwargs):
        start = time.perf_counter()
        out = self.inner(requests, *args, **kwargs)
        self.seconds += time.perf_counter() - start
        self.requests += len(requests)
        self.calls.append(requests)
        return out

    def runs(self, repeats: int) -> list[float]:
        """The first run's seconds (evaluate's) and `repeats - 1` more of the same requests."""
        runs = [self.seconds]
        for _ in range(repeats - 1):
            start = time.perf_counter()
            for requests in self.calls:
                self.inner(requests, disable_tqdm=True)
            runs.append(time.perf_counter() - start)
        return runs

    def tokens(self) -> int:
        """The tokens of the requests as lm-eval encodes them (context + continuation, an empty context being its
        end-of-text token): the benchmark's workload, counted after the timing (bench/real_model_speed.py's
        tokens per second)."""
        total = 0
        for requests in self.calls:
            for request in requests:
                context, continuation = request.args
                if context:
                    context_ids, continuation_ids = self.lm._encode_pair(context, continuation)
                    total += len(context_ids) + len(continuation_ids)
                else:
                    total += 1 + len(self.lm.tok_encode(continuation))
        return total
