#!/usr/bin/python3
"""Mininet with tern as the P4 switch (the simple_switch drop-in), then `pingall`.

Two hosts on one switch running BMv2's simple_router (configured through the Thrift API with
`tern cli`), addresses as in the fixture's commands.txt, static neighbours so no ARP is needed.
The switch class is the usual P4Switch pattern: it execs `simple_switch -i PORT@INTF ...`, here
a symlink to tern. Exits 0 when every ping succeeds. Needs root and Debian's `mininet`.

Usage: scripts/mininet-demo.py [path to tern]   (default: target/debug/tern)
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import Switch
from mininet.topo import Topo

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TERN = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/debug/tern"))
FIX = os.path.join(ROOT, "..", "shared", "fixtures", "bmv2", "targets", "simple_router")
BIN = tempfile.mkdtemp(prefix="tern-mn-")
SIMPLE_SWITCH = os.path.join(BIN, "simple_switch")
os.symlink(TERN, SIMPLE_SWITCH)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class TernSwitch(Switch):
    """A P4 switch process: `simple_switch -i P@INTF ... prog.json` (tern underneath)."""

    def __init__(self, name, json_path=None, thrift_port=9090, **kw):
        Switch.__init__(self, name, **kw)
        self.json_path = json_path
        self.thrift_port = thrift_port
        self.log = os.path.join(BIN, name + ".log")

    def start(self, controllers):
        args = [SIMPLE_SWITCH]
        for port, intf in self.intfs.items():
            if not intf.IP() and intf.name != "lo":
                args += ["-i", "%d@%s" % (port, intf.name)]
        args += ["--thrift-port", str(self.thrift_port), "--device-id", "0",
                 "--nanolog", "ipc:///tmp/bm-0-log.ipc", self.json_path]
        self.cmd(" ".join(args) + " >" + self.log + " 2>&1 &")
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.thrift_port), 0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("switch did not start: " + open(self.log).read())

    def stop(self, deleteIntfs=True):
        self.cmd("kill %" + SIMPLE_SWITCH)
        self.cmd("wait")
        Switch.stop(self, deleteIntfs)


class TwoHosts(Topo):
    def build(self):
        s1 = self.addSwitch("s1", cls=TernSwitch, json_path=os.path.join(FIX, "simple_router.json"),
                            thrift_port=free_port())
        h1 = self.addHost("h1", ip="10.0.0.10/24", mac="00:04:00:00:00:00")
        h2 = self.addHost("h2", ip="10.0.1.10/24", mac="00:04:00:00:00:01")
        self.addLink(h1, s1, port2=1)
        self.addLink(h2, s1, port2=2)


def main():
    setLogLevel("info")
    net = Mininet(topo=TwoHosts(), controller=None)
    net.start()
    try:
        s1 = net.get("s1")
        out = subprocess.run([TERN, "cli", "--thrift-port", str(s1.thrift_port), "--commands",
                              os.path.join(FIX, "commands.txt")], capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError("tern cli failed: " + out.stdout + out.stderr)
        for h, gw, gw_mac in [("h1", "10.0.0.1", "00:aa:bb:00:00:00"),
                              ("h2", "10.0.1.1", "00:aa:bb:00:00:01")]:
            host = net.get(h)
            host.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1")
            host.cmd("ip route add default via %s" % gw)
            host.cmd("ip neigh replace %s lladdr %s dev %s-eth0 nud permanent" % (gw, gw_mac, h))
        loss = net.pingAll(timeout=1)
    finally:
        net.stop()
        print(open(os.path.join(BIN, "s1.log")).read()[-400:])
        shutil.rmtree(BIN, ignore_errors=True)
    sys.exit(0 if loss == 0 else 1)


if __name__ == "__main__":
    main()
