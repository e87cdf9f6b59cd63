"""A network namespace of the test's own, and a silent drop of its traffic with nftables.

sshd and the local side (the ``ssh`` client, the link, the turn) both run inside it, on its
own loopback; ``drop(port)`` then makes every packet to or from that port vanish on input (no
reset, no error: what a dropped network or a sleeping laptop looks like to both ends).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import uuid


def netns_problem() -> str | None:
    """Why a namespace with an nftables rule cannot be made here (None: it can)."""
    if os.getuid() != 0:
        return "making a network namespace needs root"
    if shutil.which("ip") is None or shutil.which("nft") is None:
        return "ip (iproute2) and nft (nftables) are needed"
    name = f"tolaria-probe-{uuid.uuid4().hex[:8]}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True,
                          check=False)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    try:
        listed = subprocess.run(["ip", "netns", "exec", name, "nft", "list", "ruleset"],
                                capture_output=True, text=True, check=False)
        if listed.returncode != 0:
            return f"nft does not work in a namespace: {listed.stderr.strip()}"
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=False, capture_output=True)
    return None


class NetNs:
    def __init__(self) -> None:
        self.name = f"tolaria-{uuid.uuid4().hex[:10]}"

    def inside(self) -> list[str]:
        """The argv prefix that runs a command in the namespace."""
        return ["ip", "netns", "exec", self.name]

    def create(self) -> NetNs:
        subprocess.run(["ip", "netns", "add", self.name], check=True)
        subprocess.run([*self.inside(), "ip", "link", "set", "lo", "up"], check=True)
        return self

    def drop(self, port: int) -> None:
        """From now on, every TCP packet to or from ``port`` is dropped silently."""
        rules = (f"table inet tolaria_drop {{\n  chain input {{\n"
                 "    type filter hook input priority 0; policy accept;\n"
                 f"    tcp dport {port} drop\n    tcp sport {port} drop\n  }}\n}}\n")
        subprocess.run([*self.inside(), "nft", "-f", "-"], input=rules, text=True, check=True)

    def restore(self) -> None:
        """The network is back: the drop rule removed."""
        subprocess.run([*self.inside(), "nft", "delete", "table", "inet", "tolaria_drop"],
                       check=True)

    def delete(self) -> None:
        """Every process left in it (sshd's session for the dropped connection waits for hours,
        as on a real server) ended, then the namespace removed."""
        listed = subprocess.run(["ip", "netns", "pids", self.name], capture_output=True,
                                text=True, check=False).stdout.split()
        for pid in listed:
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        subprocess.run(["ip", "netns", "delete", self.name], check=False, capture_output=True)
