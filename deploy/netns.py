"""Separate hosts on one machine: Linux network namespaces on a bridge, for the separate-hosts tests
(tests/e2e/hosts.py) and a benchmark (bench/hosts.py)::

    with Hosts(["chain", "solver", "verifier"]) as hosts:     # root only: see why_not()
        hosts["solver"].ip                                     # 10.77.N.2: its own address
        subprocess.run([*hosts["solver"].launcher, sys.executable, ...])   # a process on that host

Each name gets a namespace (its own loopback, routes and ports) joined by a veth pair to one bridge
in the starting namespace, which holds the subnet's ``.254`` so the caller reaches every host too.
Names are unique per process (``vt<pid>-<name>``, interfaces ``vt<pid>b`` and ``vt<pid>h<i>``) and
everything is removed on exit, failed or not: the processes left in the namespaces (started by the
caller) are killed by pid, then the namespaces and the bridge deleted.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType

from core.errors import VeritrainError

__all__ = ["Host", "Hosts", "why_not"]


def why_not() -> str | None:
    """Why namespaces cannot be made here (None when they can): root and iproute2's ``ip`` are needed."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2) to make network namespaces"
    probe = f"vt{os.getpid()}-probe"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot make a network namespace: {made.stderr.strip()[:200]}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


@dataclass(frozen=True)
class Host:
    """One namespace: its name, its address on the bridge, the argv prefix that runs a command in it."""

    name: str
    ns: str
    ip: str

    @property
    def launcher(self) -> tuple[str, ...]:
        return ("ip", "netns", "exec", self.ns)


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise VeritrainError(f"ip {' '.join(args)}: {done.stderr.strip()[:300]}")


class Hosts:
    """Namespaces ``names`` on a bridge (up to 250 hosts), made on enter and removed on exit."""

    def __init__(self, names: Sequence[str]) -> None:
        if not 0 < len(names) <= 250 or len(set(names)) != len(names):
            raise ValueError("1..250 distinct host names")
        tag = f"vt{os.getpid() % 10**7}"
        subnet = f"10.77.{os.getpid() % 250}"
        self.bridge = f"{tag}b"
        self.gateway_ip = f"{subnet}.254"
        self.hosts = {name: Host(name, f"{tag}-{name}", f"{subnet}.{i + 1}") for i, name in enumerate(names)}
        self._veths = {name: f"{tag}h{i}" for i, name in enumerate(names)}

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def __enter__(self) -> Hosts:
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.gateway_ip}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for name, host in self.hosts.items():
                veth = self._veths[name]
                _ip("netns", "add", host.ns)
                _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", host.ns)
                _ip("link", "set", veth, "master", self.bridge)
                _ip("link", "set", veth, "up")
                _ip("-n", host.ns, "addr", "add", f"{host.ip}/24", "dev", "eth0")
                _ip("-n", host.ns, "link", "set", "eth0", "up")
                _ip("-n", host.ns, "link", "set", "lo", "up")
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.remove()

    def remove(self) -> None:
        """Kill what still runs in the namespaces, delete their veth pairs, them and the bridge. Idempotent.
        A pair is deleted by name, at once: the kernel frees a deleted namespace (and the pair with it)
        later, once the processes killed in it have exited, and the same names made again before then
        (a second :class:`Hosts` of this process) would clash."""
        for name, host in self.hosts.items():
            pids = subprocess.run(["ip", "netns", "pids", host.ns], capture_output=True, text=True).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            subprocess.run(["ip", "link", "del", self._veths[name]], capture_output=True)
            subprocess.run(["ip", "netns", "del", host.ns], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
