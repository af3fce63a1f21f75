#!/usr/bin/env python3
"""Traffic end points for scripts/virt/scenario.sh, run inside a host's network namespace.

  probe.py serve tcp|udp PORT SECONDS [READY_FILE]
        echo every TCP connection / UDP datagram for SECONDS; READY_FILE is created once the
        socket listens
  probe.py try tcp|udp ADDR PORT
        send a line to an echo server; prints `pass` when the echo came back, `refused` when
        the TCP connection was refused (RST: the packets crossed, no server), `blocked` when
        nothing came back in time (exit status 0 either way; 2 on bad usage)
"""
import socket
import sys
import threading
import time


def ready(path):
    if path:
        open(path, "w").close()


def serve(proto, port, seconds, ready_file=None):
    end = time.time() + seconds
    if proto == "tcp":
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", port))
        s.listen(16)
        ready(ready_file)

        def echo(c):
            c.settimeout(3)
            try:
                while True:
                    d = c.recv(4096)
                    if not d:
                        break
                    c.sendall(d)
            except OSError:
                pass
            c.close()

        while time.time() < end:
            s.settimeout(max(0.05, end - time.time()))
            try:
                c, _ = s.accept()
            except OSError:
                continue
            threading.Thread(target=echo, args=(c,), daemon=True).start()
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("0.0.0.0", port))
        ready(ready_file)
        while time.time() < end:
            s.settimeout(max(0.05, end - time.time()))
            try:
                d, peer = s.recvfrom(4096)
            except OSError:
                continue
            s.sendto(d, peer)


def try_(proto, addr, port):
    msg = b"tern-virt-probe\n"
    if proto == "tcp":
        try:
            c = socket.create_connection((addr, port), timeout=5)
            c.settimeout(5)
            c.sendall(msg)
            got = b""
            while len(got) < len(msg):
                d = c.recv(4096)
                if not d:
                    break
                got += d
            c.close()
            return "pass" if got == msg else "blocked"
        except ConnectionRefusedError:
            return "refused"
        except OSError:
            return "blocked"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1.0)
    for _ in range(5):
        s.sendto(msg, (addr, port))
        try:
            d, _ = s.recvfrom(4096)
            if d == msg:
                return "pass"
        except OSError:
            pass
    return "blocked"


def main(argv):
    if len(argv) in (5, 6) and argv[1] == "serve" and argv[2] in ("tcp", "udp"):
        serve(argv[2], int(argv[3]), float(argv[4]), argv[5] if len(argv) == 6 else None)
    elif len(argv) == 5 and argv[1] == "try" and argv[2] in ("tcp", "udp"):
        print(try_(argv[2], argv[3], int(argv[4])))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
