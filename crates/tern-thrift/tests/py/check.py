"""Drive tern's Thrift server with Apache Thrift's Python library, the stack BMv2's
simple_switch_CLI uses (TSocket + TBufferedTransport + TBinaryProtocol +
TMultiplexedProtocol), through Python code generated from the same IDL files.

usage: check.py PORT PYGEN_DIR   (the server must run simple_router.json, fresh state)
Prints one line per check and exits non-zero on the first failure.
"""
import sys

port, pygen = int(sys.argv[1]), sys.argv[2]
sys.path.insert(0, pygen)

from thrift.transport import TSocket, TTransport
from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
from thrift.Thrift import TApplicationException

from standard import Standard
from standard.ttypes import (BmMatchParam, BmMatchParamType, BmMatchParamExact,
                             BmMatchParamLPM, BmAddEntryOptions, InvalidTableOperation,
                             TableOperationErrorCode, InvalidRegisterOperation,
                             BmActionEntryType)
from simple_pre_lag import SimplePreLAG
from simple_pre_lag.ttypes import InvalidMcOperation, McOperationErrorCode
from simple_switch import SimpleSwitch
from simple_switch.ttypes import MirroringSessionConfig, InvalidMirroringOperation

sock = TSocket.TSocket("127.0.0.1", port)
transport = TTransport.TBufferedTransport(sock)
proto = TBinaryProtocol.TBinaryProtocol(transport)
transport.open()


def client(cls, name):
    return cls.Client(TMultiplexedProtocol.TMultiplexedProtocol(proto, name))


std = client(Standard, "standard")
pre = client(SimplePreLAG, "simple_pre_lag")
ss = client(SimpleSwitch, "simple_switch")


def check(what, cond):
    if not cond:
        print("FAIL", what)
        sys.exit(1)
    print("ok", what)


cfg = std.bm_get_config()
check("bm_get_config returns the JSON", '"ipv4_lpm"' in cfg)
import hashlib
check("bm_get_config_md5 is the MD5 of that text",
      std.bm_get_config_md5() == hashlib.md5(cfg.encode()).digest())

key = [BmMatchParam(type=BmMatchParamType.LPM,
                    lpm=BmMatchParamLPM(key=bytes([10, 0, 0, 10]), prefix_length=32))]
h = std.bm_mt_add_entry(0, "ipv4_lpm", key, "set_nhop", [bytes([10, 0, 0, 10]), bytes([0, 1])],
                        BmAddEntryOptions())
check("bm_mt_add_entry returns a handle", isinstance(h, int))
try:
    std.bm_mt_add_entry(0, "ipv4_lpm", key, "set_nhop", [bytes([10, 0, 0, 10]), bytes([0, 1])],
                        BmAddEntryOptions())
    check("duplicate entry raises", False)
except InvalidTableOperation as e:
    check("duplicate entry raises DUPLICATE_ENTRY", e.code == TableOperationErrorCode.DUPLICATE_ENTRY)
entries = std.bm_mt_get_entries(0, "ipv4_lpm")
check("bm_mt_get_entries lists it", len(entries) == 1 and entries[0].entry_handle == h)
e = entries[0]
check("entry key and priority", e.match_key[0].lpm.prefix_length == 32 and e.options.priority == -1)
check("entry action", e.action_entry.action_type == BmActionEntryType.ACTION_DATA
      and e.action_entry.action_name == "set_nhop")
d = std.bm_mt_get_default_entry(0, "ipv4_lpm")
check("no default entry is NONE", d.action_type == BmActionEntryType.NONE)
try:
    std.bm_mt_get_num_entries(0, "nope")
    check("unknown table raises", False)
except InvalidTableOperation as e:
    check("unknown table raises INVALID_TABLE_NAME", e.code == TableOperationErrorCode.INVALID_TABLE_NAME)
std.bm_mt_delete_entry(0, "ipv4_lpm", h)
check("delete", std.bm_mt_get_num_entries(0, "ipv4_lpm") == 0)
try:
    std.bm_register_read(0, "nope", 0)
    check("unknown register raises", False)
except InvalidRegisterOperation as e:
    check("unknown register raises INVALID_REGISTER_NAME", e.code == 1)

check("mc group handle is the group id", pre.bm_mc_mgrp_create(0, 3) == 3)
n = pre.bm_mc_node_create(0, 7, "1001", "")
pre.bm_mc_node_associate(0, 3, n)
dump = pre.bm_mc_get_entries(0)
check("mc dump has ports 0 and 3", '"ports":[0,3]' in dump.replace(" ", ""))
try:
    pre.bm_mc_node_destroy(0, 99)
    check("bad node raises", False)
except InvalidMcOperation as e:
    check("bad node raises INVALID_L1_HANDLE", e.code == McOperationErrorCode.INVALID_L1_HANDLE)

ss.mirroring_session_add(4, MirroringSessionConfig(port=6))
cfg4 = ss.mirroring_session_get(4)
check("mirroring session round trip", cfg4.port == 6 and cfg4.mgid is None)
ss.mirroring_session_delete(4)
try:
    ss.mirroring_session_get(4)
    check("deleted session raises", False)
except InvalidMirroringOperation as e:
    check("deleted session raises SESSION_NOT_FOUND", e.code == 1)
check("queue depth status 0", ss.set_all_egress_queue_depths(64) == 0)
check("time elapsed is a number", ss.get_time_elapsed_us() >= 0)

info = std.bm_mgmt_get_info()
check("bm_mgmt_get_info", info.thrift_port == 9090 and info.device_id == 0)

# An unknown method on a known service: a TApplicationException, connection still usable.
bogus = client(Standard, "standard")
bogus._oprot.writeMessageBegin("standard:bm_no_such_call", 1, 0)
bogus._oprot.writeStructBegin("args")
bogus._oprot.writeFieldStop()
bogus._oprot.writeStructEnd()
bogus._oprot.writeMessageEnd()
bogus._oprot.trans.flush()
(name, mtype, seq) = proto.readMessageBegin()
x = TApplicationException()
x.read(proto)
proto.readMessageEnd()
check("unknown method gives UNKNOWN_METHOD", mtype == 3 and x.type == TApplicationException.UNKNOWN_METHOD)
check("connection survives", std.bm_get_config() == cfg)
transport.close()
print("ALL OK")
