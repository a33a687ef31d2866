"""Network namespaces for ``scripts/sim_netem.py``: hosts joined by veth pairs to a bridge
namespace, a lossy, delayed link on every host, NAT routers, and clean-up.

Every host (the chain, each node, each NAT router) is a namespace with one veth
pair to the bridge namespace. Forwarding in the bridge namespace is either a Linux
bridge with ``tc netem`` on each host's interface (kernel has sch_netem) or
``scripts/_netem_switch.py`` with the same delay/loss model (kernel without it).
A NATed node sits in its own namespace behind a router namespace that masquerades
its traffic and forwards nothing inbound that it did not start. Only addresses
inside these namespaces are used; ``close()`` kills what was started and deletes
every namespace this object created.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

CLONE_NEWNET = 0x40000000
PUBLIC_PREFIX = 16
NAT_RULES = """
table ip nat {
  chain post { type nat hook postrouting priority 100; oifname "eth0" masquerade%s; }
}
table inet gate {
  chain forward {
    type filter hook forward priority 0; policy drop;
    ct state established,related accept
    iifname "lan0" accept
  }
}
"""


def run(*argv: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    command = ["ip", "netns", "exec", ns, *argv] if ns else list(argv)
    return subprocess.run(command, capture_output=True, text=True, check=check)


def why_not_available() -> str | None:
    """None when namespaces can be built here, else the reason (for a clear skip)."""
    if not sys.platform.startswith("linux"):
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    for tool in ("ip", "ethtool"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            return f"`{tool}` is not installed (Debian: iproute2, ethtool)"
    return None


def kernel_has_netem(probe_ns: str) -> bool:
    """Whether ``tc qdisc … netem`` works (a kernel without sch_netem answers "unknown")."""
    run("ip", "netns", "add", probe_ns)
    try:
        return run("tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms",
                   ns=probe_ns, check=False).returncode == 0
    finally:
        run("ip", "netns", "del", probe_ns, check=False)


def enter_namespace(name: str) -> None:
    """Move the calling *thread* into network namespace ``name`` (a thread-pool initializer)."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns({name}) failed")
    finally:
        os.close(fd)


@dataclass
class Topology:
    prefix: str
    delay_ms: float
    jitter_ms: float
    loss: float
    kernel_netem: bool
    # "preserving": the router keeps a connection's source port when it can (hole punching
    # works); "random": every mapping gets a random port (a symmetric NAT: it never does).
    nat_ports: str = "preserving"
    namespaces: list[str] = field(default_factory=list)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _ports: list[str] = field(default_factory=list)

    @property
    def bridge(self) -> str:
        return f"{self.prefix}-br"

    def _namespace(self, name: str) -> str:
        ns = f"{self.prefix}-{name}"
        run("ip", "netns", "add", ns)
        self.namespaces.append(ns)
        run("ip", "link", "set", "lo", "up", ns=ns)
        return ns

    def open(self) -> None:
        self._namespace("br")

    def _link(self, ns: str, host_if: str, peer_ns: str, peer_if: str) -> None:
        """A veth pair ``ns:host_if`` <-> ``peer_ns:peer_if``, up, offloads off."""
        tmp_a, tmp_b = f"{self.prefix[:4]}a{len(self._ports)}", f"{self.prefix[:4]}b{len(self._ports)}"
        self._ports.append(peer_if)
        run("ip", "link", "add", tmp_a, "type", "veth", "peer", "name", tmp_b)
        for temp, target_ns, name in ((tmp_a, ns, host_if), (tmp_b, peer_ns, peer_if)):
            run("ip", "link", "set", temp, "netns", target_ns)
            run("ip", "link", "set", temp, "name", name, ns=target_ns)
            # Whole, checksummed frames: the userspace switch forwards them verbatim.
            run("ethtool", "-K", name, "tso", "off", "gso", "off", "gro", "off", "tx", "off",
                "rx", "off", ns=target_ns, check=False)
            run("ip", "link", "set", name, "up", ns=target_ns)

    def public_host(self, name: str, address: str) -> str:
        """A namespace on the public segment at ``address`` (eth0); returns its name."""
        ns = self._namespace(name)
        self._link(ns, "eth0", self.bridge, f"p-{name}"[:15])
        run("ip", "addr", "add", f"{address}/{PUBLIC_PREFIX}", "dev", "eth0", ns=ns)
        if self.kernel_netem:
            run("tc", "qdisc", "add", "dev", "eth0", "root", "netem", "delay",
                f"{self.delay_ms}ms", f"{self.jitter_ms}ms", "loss", f"{self.loss * 100}%", ns=ns)
        return ns

    def nat_host(self, name: str, public_address: str, lan_index: int) -> tuple[str, str]:
        """A node namespace behind a masquerading router; returns (node ns, LAN address)."""
        router = self.public_host(f"r{name}", public_address)
        ns = self._namespace(name)
        lan = f"192.168.{lan_index}"
        self._link(router, "lan0", ns, "eth0")
        run("ip", "addr", "add", f"{lan}.1/24", "dev", "lan0", ns=router)
        run("ip", "addr", "add", f"{lan}.2/24", "dev", "eth0", ns=ns)
        run("ip", "route", "add", "default", "via", f"{lan}.1", ns=ns)
        run("sysctl", "-qw", "net.ipv4.ip_forward=1", ns=router)
        rules = NAT_RULES % (" fully-random" if self.nat_ports == "random" else "")
        subprocess.run(["ip", "netns", "exec", router, "nft", "-f", "-"], input=rules,
                       text=True, check=True, capture_output=True)
        return ns, f"{lan}.2"

    def start_forwarding(self, log: Path) -> str:
        """Connect every public port; returns how the link model is applied."""
        ports = [port for port in self._ports if port.startswith("p-")]
        if self.kernel_netem:
            run("ip", "link", "add", "br0", "type", "bridge", ns=self.bridge)
            for port in ports:
                run("ip", "link", "set", port, "master", "br0", ns=self.bridge)
            run("ip", "link", "set", "br0", "up", ns=self.bridge)
            return "tc netem on each host's veth, Linux bridge"
        switch = Path(__file__).with_name("_netem_switch.py")
        self.spawn(self.bridge, [sys.executable, str(switch), "--delay-ms", str(self.delay_ms),
                                 "--jitter-ms", str(self.jitter_ms), "--loss", str(self.loss),
                                 *ports], log)
        return "userspace netem switch (kernel has no sch_netem), veth pairs"

    def spawn(self, ns: str, argv: list[str], log: Path, env: dict[str, str] | None = None,
              ) -> subprocess.Popen[bytes]:
        with open(log, "ab") as out:
            process = subprocess.Popen(["ip", "netns", "exec", ns, *argv], stdout=out,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env=env, start_new_session=True)
        self.processes.append(process)
        return process

    def close(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
        for process in reversed(self.processes):
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        self.processes.clear()
        for ns in reversed(self.namespaces):
            run("ip", "netns", "del", ns, check=False)
        self.namespaces.clear()
