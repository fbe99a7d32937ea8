"""A throwaway single-node Slurm cluster for tests: munged, slurmctld and slurmd from Debian's `slurm-wlm`
and `munge`, with their own key, socket, ports, configuration and state under one folder, so they touch no
system Slurm or munge. They run as the current user (root on CI); `stop()` ends them by their process ids.

The cluster has no accounting database (`AccountingStorageType=accounting_storage/none`), like a site
without slurmdbd: `sacct` cannot answer, so Snakemake's Slurm executor must poll with
`--slurm-status-command squeue` (which the default `MinJobAge` of 300 s allows). The node declares more
CPUs and memory than the machine has (`SlurmdParameters=config_overrides`), so the shipped profiles'
requests (8 CPUs, 32 GB for scoring) are accepted on a 2-core runner; jobs then share the real cores.

Clients find the cluster through SLURM_CONF, which sbatch hands to the batch job, but the executor's job step
drops every SLURM_* variable before its nested `srun` (a real site has its slurm.conf at the default path
or serves it configless). So `env` also puts a `srun` first on PATH that sets SLURM_CONF and runs the real one.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "squeue", "scancel", "sinfo")
NODE = "lmbiasnode"


class ClusterUnavailable(RuntimeError):
    """The daemons are missing or did not come up; the message says which and why."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _binary(name: str) -> str:
    for folder in (None, "/usr/sbin", "/sbin"):
        path = shutil.which(name, path=folder)
        if path:
            return path
    raise ClusterUnavailable(f"{name} not found (apt-get install slurm-wlm munge)")


@dataclass
class SlurmCluster:
    root: Path
    cpus: int = 8
    memory_mb: int = 64000
    processes: list[subprocess.Popen] = field(default_factory=list)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """Environment for clients and jobs: SLURM_CONF points every Slurm command at this cluster."""
        path = f"{self.root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
        return {**os.environ, "SLURM_CONF": str(self.conf), "PATH": path}

    def start(self, timeout: float = 60.0) -> SlurmCluster:
        binaries = {name: _binary(name) for name in DAEMONS + CLIENTS + ("mungekey",)}
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o700)  # munged refuses key and socket folders others can write
        for sub in ("munge", "state", "spool", "log", "bin"):
            (self.root / sub).mkdir(exist_ok=True)
            (self.root / sub).chmod(0o700)
        key, sock = self.root / "munge" / "munge.key", self.root / "munge" / "munge.socket"
        self._run([binaries["mungekey"], "--create", f"--keyfile={key}", "--force"])
        self._spawn(
            [
                binaries["munged"],
                "--foreground",
                "--force",
                f"--key-file={key}",
                f"--socket={sock}",
                f"--pid-file={self.root / 'munge' / 'munged.pid'}",
                f"--seed-file={self.root / 'munge' / 'seed'}",
                f"--log-file={self.root / 'log' / 'munged.log'}",
            ],
            "munged",
        )
        self._wait(lambda: sock.exists(), timeout, "munged did not create its socket")
        self.conf.write_text(self._config(sock))
        srun = self.root / "bin" / "srun"
        srun.write_text(f'#!/bin/sh\nSLURM_CONF={self.conf} exec {binaries["srun"]} "$@"\n')
        srun.chmod(0o755)
        self._spawn([binaries["slurmctld"], "-D", "-i", "-f", str(self.conf)], "slurmctld")
        self._spawn([binaries["slurmd"], "-D", "-N", NODE, "-f", str(self.conf)], "slurmd")
        self._wait(self._node_idle, timeout, "the node did not become idle")
        return self

    def _config(self, munge_socket: Path) -> str:
        host = socket.gethostname()
        r = self.root
        return f"""\
ClusterName=lmbiastest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser={pwd.getpwuid(os.getuid()).pw_name}
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={r / "state"}
SlurmdSpoolDir={r / "spool"}
SlurmctldPidFile={r / "slurmctld.pid"}
SlurmdPidFile={r / "slurmd.pid"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=300
NodeName={NODE} NodeHostname={host} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={self.memory_mb} State=UNKNOWN
PartitionName=cpu Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes={NODE} MaxTime=INFINITE State=UP
"""

    def _node_idle(self) -> bool:
        proc = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=self.env, capture_output=True, text=True)
        return proc.returncode == 0 and proc.stdout.split()[:1] == ["idle"]

    def _spawn(self, cmd: list[str], name: str) -> None:
        log = open(self.root / "log" / f"{name}.out", "w")
        self.processes.append(subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT))

    def _run(self, cmd: list[str]) -> None:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise ClusterUnavailable(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")

    def _wait(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dead = [p for p in self.processes if p.poll() is not None]
            if dead:
                raise ClusterUnavailable(f"{what}: {self._describe(dead)}")
            if ready():
                return
            time.sleep(0.3)
        raise ClusterUnavailable(f"{what} within {timeout:.0f} s:\n{self.logs()}")

    def _describe(self, dead: list[subprocess.Popen]) -> str:
        return "; ".join(f"{Path(p.args[0]).name} exited with {p.returncode}" for p in dead) + "\n" + self.logs()

    def logs(self) -> str:
        parts = []
        for log in sorted((self.root / "log").glob("*")):
            parts.append(f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:]))
        return "\n".join(parts)

    def stop(self) -> None:
        """Cancel what is left in the queue, then end the daemons (newest first) by their process ids."""
        if shutil.which("scancel", path=self.env.get("PATH")):  # absent where slurm-wlm is not installed: skip
            subprocess.run(["scancel", "--full", "--partition=cpu,gpu"], env=self.env, capture_output=True)
        for proc in reversed(self.processes):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.processes.clear()
