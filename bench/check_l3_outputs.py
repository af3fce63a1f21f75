#!/usr/bin/env python3
"""Check the L3-router outputs of bench/run_workers_storm.sh (run in its DIR)."""
import struct, sys
# Every frame must leave on its route's port (route = dst IP byte 2, port = 1 + r % 4) with
# next-hop MAC 02:aa|bb:00:00:00:r and TTL 63.
total = 0; bad = 0; macs = {}
for p in range(1, 5):
    b = open(f"p{p}_out.pcap", "rb").read()
    off = 24
    while off < len(b):
        _, _, cap, _ = struct.unpack_from("<IIII", b, off); off += 16
        f = b[off:off+cap]; off += cap
        total += 1
        r = f[32]
        ok = (1 + r % 4 == p and f[0] == 2 and f[1] in (0xaa, 0xbb) and f[5] == r and f[22] == 63)
        macs[f[1]] = macs.get(f[1], 0) + 1
        bad += not ok
print(f"frames out {total}, wrong {bad}, by next-hop MAC: " + ", ".join(f"{k:02x}: {v}" for k, v in sorted(macs.items())))
