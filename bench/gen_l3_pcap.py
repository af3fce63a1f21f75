#!/usr/bin/env python3
"""Traffic and routes for `tern run --workers N` on p4/bench/l3_router.p4.

Writes DIR/p0_in.pcap (PACKETS UDP/IPv4 frames of SIZE bytes, FLOWS flows cycled in order,
flow k to 10.0.(k % ROUTES).(1 + k // ROUTES % 254), source 172.16.x.x, per-flow UDP ports)
empty DIR/p1_in.pcap .. p4_in.pcap, and DIR/routes.txt (one /24 route per ROUTES to ports
1..4, simple_switch_CLI language). Run from DIR:

    tern run l3_router.p4 --use-files 0 -i 0@p0 -i 1@p1 -i 2@p2 -i 3@p3 -i 4@p4 \
        --commands routes.txt --workers N

    bench/gen_l3_pcap.py DIR [PACKETS [FLOWS [ROUTES [SIZE]]]]
"""
import os
import struct
import sys


def frame(k, routes, size):
    r = k % routes
    host = 1 + (k // routes) % 254
    dst = bytes([10, 0, r & 0xFF, host])
    src = bytes([172, 16 + ((k >> 16) & 15), (k >> 8) & 0xFF, k & 0xFF])
    total = size - 14
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0, 64, 17, 0, src, dst))
    s = sum(struct.unpack("!10H", bytes(ip)))
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    ip[10:12] = struct.pack("!H", ~s & 0xFFFF)
    eth = bytes([2, 0xFF, 0, 0, (k >> 8) & 0xFF, k & 0xFF, 2, 0, 0, 0, (k >> 8) & 0xFF, k & 0xFF])
    udp = struct.pack("!HHHH", 1024 + k % 60000, 5000 + k % 60000, total - 20, 0)
    b = eth + b"\x08\x00" + bytes(ip) + udp
    return b + bytes(size - len(b))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    packets, flows, routes, size = (
        [int(a) for a in sys.argv[2:]] + [1_000_000, 1024, 16, 64][len(sys.argv) - 2:]
    )[:4]
    if routes > 256 or flows < 1 or size < 42:
        sys.exit("ROUTES must be at most 256, FLOWS at least 1, SIZE at least 42")
    os.makedirs(out, exist_ok=True)
    frames = [frame(k, routes, size) for k in range(flows)]
    with open(os.path.join(out, "p0_in.pcap"), "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i in range(packets):
            b = frames[i % flows]
            f.write(struct.pack("<IIII", 1_000_000 + i // 1_000_000, i % 1_000_000, len(b), len(b)))
            f.write(b)
    for port in range(1, 5):
        # Output ports need an input file too (empty), as with simple_switch --use-files.
        with open(os.path.join(out, f"p{port}_in.pcap"), "wb") as f:
            f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    with open(os.path.join(out, "routes.txt"), "w") as f:
        for r in range(routes):
            f.write(
                f"table_add RIngress.ipv4_lpm RIngress.set_nhop 10.0.{r}.0/24 => "
                f"02:aa:00:00:00:{r:02x} {1 + r % 4}\n"
            )


if __name__ == "__main__":
    main()
