#!/usr/bin/env python3
"""Writes p4/kv/madinc.stf: the STF packet tests of madinc.p4 (hit, miss, write-through
invalidation, forged and unknown tenants, isolation between tenants with the same key, page
ownership, hot report once per tenant, strict parsing), with frames built from the MADINC wire
format (crates/tern-kv/PROTOCOL.md, "MADINC extension"). Run: `python3 p4/kv/gen_madinc_stf.py`;
the generated file is committed, so the suite does not need Python.

Topology: the client 10.77.1.1:8888 on port 1, the store 10.77.2.1:1152 on port 2, the
controller (clone session 250) on port 3."""

import os
import struct

# The frames, the key encoding and the STF writer are the FarReach/NetCache generator's.
from gen_stf import CLIENT, SERVER, Stf, frame, key

READ_REQUEST, READ_REPLY, WRITE_REQUEST, HOT_REPORT = 0x0E00, 0x0E01, 0x0E02, 0x0E04
SWITCH_ID = 7
# tenant id -> (secret tag, hot threshold)
TENANTS = {1: (0x11111111, 2), 2: (0x22222222, 3), 3: (0x33333333, 2)}


def value(v):
    return struct.pack(">H", len(v)) + v + bytes(-len(v) % 8)


def mad(op, tenant, k, tag=None, body=b""):
    if tag is None:
        tag = TENANTS[tenant][0]
    return struct.pack(">HHI", op, tenant, tag) + k + body


def c2s(payload, udp_csum=0x4321, **kw):
    return frame(CLIENT, SERVER, payload, True, udp_csum=udp_csum, **kw).hex()


def s2c(payload, udp_csum=0x4321, **kw):
    return frame(SERVER, CLIENT, payload, False, udp_csum=udp_csum, **kw).hex()


def install(s, tenant, k, slot, v):
    """The controller's insert: value registers, then valid := 1, then the lookup entry."""
    s.cmd(f"register_write vallen_reg {slot} {len(v)}")
    padded = v + bytes(-len(v) % 8)
    for i in range(len(padded) // 8):
        w = int.from_bytes(padded[8 * i:8 * i + 8], "big")
        s.cmd(f"register_write val_reg {slot * 16 + i} {w}")
    s.cmd(f"register_write valid_reg {slot} 1")
    s.cmd(f"add cache_lookup tenant:{tenant} key:0x{k.hex()} set_slot(slot:{slot})")


def hit_reply(tenant, k, v):
    body = struct.pack(">BH", 1, 0xFFFF) + value(v)
    return s2c(mad(READ_REPLY, tenant, k, body=body), udp_csum=0)


def main():
    s = Stf("madinc.p4: tenants, isolation, cache hits and misses, hot reports",
            "p4/kv/gen_madinc_stf.py")
    s.cmd("add forward dst:0x0a4d0201 to_port(port:2)")
    s.cmd("add forward dst:0x0a4d0101 to_port(port:1)")
    s.cmd(f"mirroring_add 250 3")
    s.cmd(f"setdefault mad_params set_switch(switch_id:{SWITCH_ID})")
    for t, (secret, thr) in TENANTS.items():
        s.cmd(f"add tenant tenant:{t} set_tenant(secret:{secret}, hot_threshold:{thr})")
    s.c("pages: page 0 to tenant 1, page 1 to tenant 2 (page_owner_reg = tenant + 1); tenant 3 "
        "has none")
    s.cmd("register_write page_owner_reg 0 2")
    s.cmd("register_write page_owner_reg 1 3")
    k = key(0x0B)
    install(s, 1, k, 5, b"value-01")
    install(s, 2, k, 128 + 3, b"tenant-2 has its own value")

    s.c("hit: tenant 1 reads k -> READ_REPLY from the switch (source 0xFFFF) with tenant 1's value")
    s.expect(1, hit_reply(1, k, b"value-01"))
    s.packet(1, c2s(mad(READ_REQUEST, 1, k)))

    s.c("isolation: tenant 2 reads the same key -> its own value, never tenant 1's")
    s.expect(1, hit_reply(2, k, b"tenant-2 has its own value"))
    s.packet(1, c2s(mad(READ_REQUEST, 2, k)))

    s.c("isolation: tenant 3 has no entry for k -> miss, the request goes on to the store unchanged")
    s.expect(2, c2s(mad(READ_REQUEST, 3, k)))
    s.packet(1, c2s(mad(READ_REQUEST, 3, k)))

    s.c("forged: tenant 1's id with tenant 2's tag, tenant 2's id with tag 0 -> dropped, counted")
    s.packet(1, c2s(mad(READ_REQUEST, 1, k, tag=TENANTS[2][0])))
    s.packet(1, c2s(mad(READ_REQUEST, 2, k, tag=0)))
    s.c("a forged write does not invalidate tenant 1's copy")
    s.packet(1, c2s(mad(WRITE_REQUEST, 1, k, tag=0x11111110, body=value(b"evil"))))
    s.expect(1, hit_reply(1, k, b"value-01"))
    s.packet(1, c2s(mad(READ_REQUEST, 1, k)))
    s.cmd("check_counter mad_dropped(4) packets == 3")

    s.c("unknown tenant 9 (any tag) -> dropped, counted")
    s.packet(1, c2s(mad(READ_REQUEST, 9, k, tag=0x11111111)))
    s.packet(1, c2s(mad(WRITE_REQUEST, 9, k, tag=0, body=value(b"x"))))
    s.cmd("check_counter mad_dropped(3) packets == 2")

    s.c("page ownership: an entry of tenant 3 pointing into tenant 1's page 0 is refused")
    k2 = key(0x0C)
    s.cmd(f"add cache_lookup tenant:3 key:0x{k2.hex()} set_slot(slot:5)")
    s.packet(1, c2s(mad(READ_REQUEST, 3, k2)))
    s.cmd("check_counter mad_dropped(5) packets == 1")

    s.c("write-through: tenant 1 writes k -> its copy is invalidated, the write goes on unchanged")
    w = c2s(mad(WRITE_REQUEST, 1, k, body=value(b"value-02")))
    s.expect(2, w)
    s.packet(1, w)
    s.c("tenant 1's read of k now goes to the store; tenant 2's copy of k is still served")
    s.expect(2, c2s(mad(READ_REQUEST, 1, k)))
    s.packet(1, c2s(mad(READ_REQUEST, 1, k)))
    s.expect(1, hit_reply(2, k, b"tenant-2 has its own value"))
    s.packet(1, c2s(mad(READ_REQUEST, 2, k)))
    s.c("the controller refreshes tenant 1's copy -> hit with the new value")
    install_value = b"value-02"
    s.cmd(f"register_write val_reg {5 * 16} {int.from_bytes(install_value, 'big')}")
    s.cmd("register_write valid_reg 5 1")
    s.expect(1, hit_reply(1, k, install_value))
    s.packet(1, c2s(mad(READ_REQUEST, 1, k)))
    s.c("an uncached write is counted and forwarded")
    w = c2s(mad(WRITE_REQUEST, 3, key(0x0D), body=value(bytes(range(128)))))
    s.expect(2, w)
    s.packet(1, w)
    s.cmd("check_counter mad_ops(3) packets == 1")
    s.cmd("check_counter mad_ops(4) packets == 1")

    s.c("hot report once: tenant 1 (threshold 2) reads uncached h three times; the second read "
        "is also cloned to the controller (port 3) as HOT_REPORT(switch 7, frequency 2)")
    h = key(0x77)
    r = c2s(mad(READ_REQUEST, 1, h))
    report = c2s(mad(HOT_REPORT, 1, h, body=struct.pack(">HH", SWITCH_ID, 2)), udp_csum=0)
    s.expect(2, r)
    s.packet(1, r)
    s.expect(2, r)
    s.expect(3, report)
    s.packet(1, r)
    s.expect(2, r)
    s.packet(1, r)
    s.c("per tenant: tenant 2 (threshold 3) reading the same key is counted apart: its third "
        "read is reported, once")
    r2 = c2s(mad(READ_REQUEST, 2, h))
    report2 = c2s(mad(HOT_REPORT, 2, h, body=struct.pack(">HH", SWITCH_ID, 3)), udp_csum=0)
    s.expect(2, r2)
    s.packet(1, r2)
    s.expect(2, r2)
    s.packet(1, r2)
    s.expect(2, r2)
    s.expect(3, report2)
    s.packet(1, r2)
    s.expect(2, r2)
    s.packet(1, r2)
    s.cmd("check_counter mad_ops(5) packets == 2")
    s.cmd("check_counter mad_ops(1) packets == 8")

    s.c("other MADINC ops (a store's READ_REPLY) and FarReach ops pass unchanged")
    rep = s2c(mad(READ_REPLY, 1, k, body=struct.pack(">BH", 1, 0) + value(b"value-02")))
    s.expect(1, rep)
    s.packet(2, rep)
    get = c2s(struct.pack(">H", 0x0030) + k)
    s.expect(2, get)
    s.packet(1, get)
    s.cmd("check_counter mad_ops(6) packets == 1")

    s.c("strict parsing: truncated, trailing byte, oversized value -> dropped, counted, no state")
    s.packet(1, c2s(mad(READ_REQUEST, 1, k)[:12]))
    s.packet(1, c2s(mad(READ_REQUEST, 1, k) + b"\x00"))
    big = struct.pack(">H", 136) + bytes(136)
    s.packet(1, c2s(mad(WRITE_REQUEST, 1, k, body=big)))
    s.cmd("check_counter mad_dropped(0) packets == 1")
    s.cmd("check_counter mad_dropped(1) packets == 1")
    s.cmd("check_counter mad_dropped(2) packets == 1")
    s.c("tenant 1's copy survived every dropped packet")
    s.expect(1, hit_reply(1, k, install_value))
    s.packet(1, c2s(mad(READ_REQUEST, 1, k)))
    s.cmd("check_counter mad_ops(0) packets == 6")
    s.cmd("check_counter tenant_hits(1) packets == 4")
    s.cmd("check_counter tenant_hits(2) packets == 2")

    s.write(os.path.join(os.path.dirname(os.path.abspath(__file__)), "madinc.stf"))


if __name__ == "__main__":
    main()
