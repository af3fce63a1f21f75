/* netcache.p4 — NetCache's write-through read cache (SOSP'17) for tern's key-value topologies
 * (`tern kv up --cache netcache`), in FarReach's wire format and op space as FarReach's authors
 * re-implemented it (../shared/reference/kv-caching.md §2.4). Written for tern in plain P4-16 +
 * v1model (no tern-only extensions), so p4c's BMv2 back end compiles the same source. Forwarding,
 * strict parsing, sketch, Bloom filter, seq assignment and slot layout are farreach.p4's; see
 * there and p4/kv/README.md.
 *
 * Requests from clients (GETREQ, PUTREQ, DELREQ; every other op is forwarded unchanged):
 *   every PUT/DEL gets seq = max(seq_reg[crc32(key) mod 32768], seq_base) + 1;
 *   GET hit (validvalue 1, latest 1): answered by the switch (GETRES_SEQ, nodeidx 0xFFFF);
 *   GET of a cached key whose copy is invalid: GETREQ to the server;
 *   uncached GET, sampled: count-min sketch + Bloom filter; the first time the key is hot the
 *     request becomes NETCACHE_GETREQ_POP (the server answers and reports it to the switch OS);
 *   PUT/DEL of a cached key (write-through): the copy is invalidated (latest := 0, savedseq :=
 *     the write's seq) and the write goes on as NETCACHE_PUTREQ_SEQ_CACHED /
 *     NETCACHE_DELREQ_SEQ_CACHED, which tells the server to refresh the copy afterwards;
 *   PUT/DEL otherwise: PUTREQ_SEQ / DELREQ_SEQ.
 * NETCACHE_VALUEUPDATE from a server (value, seq, stat): if the key is cached and valid and the
 *   update's seq is at least the slot's savedseq (no newer write invalidated it) and at least the
 *   last seq assigned in the key's seq bucket (no write of the key can still be on its way to
 *   the server), the copy is refreshed and latest := 1; the switch then answers
 *   NETCACHE_VALUEUPDATE_ACK to the server. A refused update is dropped (counted): the server
 *   retries with its then-current record. An update for a key that is not cached is acknowledged.
 * Large values (129..8192 bytes; PUTREQ): not parsed, never cached: the PUT gets a seq, a cached
 *   copy is invalidated and the write goes on as TERN_PUTREQ_LARGE_SEQ (seq_hdr in front of the
 *   value); the server sends no update for it. As farreach.p4.
 * Strict parsing as farreach.p4: kv_dropped 0 truncated, 1 length, 2 shadowtype, 3 oversized. */
#include <core.p4>
#include <v1model.p4>

#ifndef KV_RECORDS
#define KV_RECORDS 10000
#endif
#ifndef KV_CM_WIDTH
#define KV_CM_WIDTH 65536
#endif
#ifndef KV_BF_WIDTH
#define KV_BF_WIDTH 262144
#endif
#ifndef KV_SEQ_BUCKETS
#define KV_SEQ_BUCKETS 32768
#endif
/* Value words (8 bytes each) per record: values up to 128 bytes. */
#define KV_WORDS 16

const bit<16> TYPE_IPV4 = 0x0800;
const bit<16> TYPE_ARP  = 0x0806;
const bit<8>  PROTO_UDP = 17;

const bit<16> GETREQ = 0x0030;
const bit<16> PUTREQ = 0x0001;
const bit<16> DELREQ = 0x0040;
const bit<16> GETRES_SEQ = 0x006b;
const bit<16> PUTRES_SEQ = 0x000a;
const bit<16> DELRES_SEQ = 0x001a;
const bit<16> PUTREQ_SEQ = 0x0003;
const bit<16> DELREQ_SEQ = 0x0002;
const bit<16> NETCACHE_GETREQ_POP = 0x0120;
const bit<16> NETCACHE_PUTREQ_SEQ_CACHED = 0x0043;
const bit<16> NETCACHE_DELREQ_SEQ_CACHED = 0x0022;
const bit<16> NETCACHE_VALUEUPDATE = 0x003b;
const bit<16> NETCACHE_VALUEUPDATE_ACK = 0x0190;
/* tern: a PUTREQ of a large value with its seq (seq_hdr in front of the value). */
const bit<16> TERN_PUTREQ_LARGE_SEQ = 0x0f63;

/* kv_dropped counter indexes (strict parsing). */
const bit<32> DROP_TRUNCATED = 0;
const bit<32> DROP_LENGTH = 1;
const bit<32> DROP_SHADOWTYPE = 2;
const bit<32> DROP_OVERSIZED = 3;

/* kv_ops counter indexes. */
const bit<32> OPS_GET_HIT = 0;
const bit<32> OPS_GET_MISS = 1;
const bit<32> OPS_GET_INVALID = 2;
const bit<32> OPS_WRITE_INVALIDATE = 4;
const bit<32> OPS_WRITE_TO_SERVER = 5;
const bit<32> OPS_HOT_REPORT = 6;
const bit<32> OPS_UPDATE = 7;
const bit<32> OPS_UPDATE_REFUSED = 8;
const bit<32> OPS_UPDATE_UNCACHED = 9;
const bit<32> OPS_PASS = 10;
const bit<32> OPS_LARGE_WRITE = 11;
const bit<32> OPS_LARGE_INVALIDATE = 12;

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header arp_t {
    bit<16> htype;
    bit<16> ptype;
    bit<8>  hlen;
    bit<8>  plen;
    bit<16> oper;
    bit<48> sha;
    bit<32> spa;
    bit<48> tha;
    bit<32> tpa;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

header udp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<16> length;
    bit<16> checksum;
}

/* FarReach's op_hdr: the 16-byte key as one field. */
header op_t {
    bit<16>  optype;
    bit<128> key;
}

header vallen_t {
    bit<16> vallen;
}

header val_t {
    bit<64> word;
}

header shadowtype_t {
    bit<16> shadowtype;
}

header seq_t {
    bit<32> seq;
    bit<32> token;
}

header stat_t {
    bit<8>  stat;
    bit<16> nodeidx;
    bit<8>  padding;
}

struct metadata {
    bit<32> dst;
    /* UDP to or from a server port: an op header follows. */
    bit<1>  kv;
    bit<1>  from_server;
    /* The op is one the switch parses completely (its length is checked). */
    bit<1>  parsed;
    bit<8>  words;
    /* A value longer than 128 bytes: not parsed, never cached (the large-value path). */
    bit<1>  large;
    /* The packet was changed: lengths and the IPv4 checksum are recomputed. */
    bit<1>  rewrite;
    /* kv_params */
    bit<16> hot_threshold;
    bit<1>  sample_all;
    bit<32> seq_base;
    bit<32> snapshot_token;
    /* cache_lookup */
    bit<1>  is_cached;
    bit<32> idx;
    bit<8>  valid;
    bit<1>  sampled;
    bit<1>  report;
    bit<32> seq;
    bit<32> bucket;
}

struct headers {
    ethernet_t     ethernet;
    arp_t          arp;
    ipv4_t         ipv4;
    udp_t          udp;
    op_t           op;
    seq_t          lseq;
    vallen_t       vallen;
    val_t[KV_WORDS] vals;
    shadowtype_t   shadow;
    seq_t          seq;
    stat_t         stat;
}

parser KvParser(packet_in packet,
                out headers hdr,
                inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            TYPE_IPV4: parse_ipv4;
            TYPE_ARP: parse_arp;
            default: accept;
        }
    }

    state parse_arp {
        packet.extract(hdr.arp);
        transition accept;
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.fragOffset, hdr.ipv4.protocol) {
            (5, 0, PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dstPort, hdr.udp.srcPort) {
            (0x0480 &&& 0xFF80, _): parse_request;
            (_, 0x0480 &&& 0xFF80): parse_response;
            default: accept;
        }
    }

    state parse_request {
        meta.kv = 1;
        packet.extract(hdr.op);
        transition select(hdr.op.optype) {
            GETREQ: parsed_done;
            DELREQ: parsed_done;
            PUTREQ: parse_vallen;
            default: accept;
        }
    }

    state parse_response {
        meta.kv = 1;
        meta.from_server = 1;
        packet.extract(hdr.op);
        transition select(hdr.op.optype) {
            NETCACHE_VALUEUPDATE: parse_vallen;
            default: accept;
        }
    }

    state parse_vallen {
        packet.extract(hdr.vallen);
        meta.words = (bit<8>) ((hdr.vallen.vallen + 7) >> 3);
        transition select(hdr.vallen.vallen) {
            0: parse_shadow;
            0 &&& 0xFF80: parse_words;
            128: parse_words;
            /* Large: the value is not parsed (ingress checks its length). */
            default: parse_large;
        }
    }

    state parse_large {
        meta.large = 1;
        transition accept;
    }

    state parse_words {
        packet.extract(hdr.vals.next);
        meta.words = meta.words - 1;
        transition select(meta.words) {
            0: parse_shadow;
            default: parse_words;
        }
    }

    state parse_shadow {
        packet.extract(hdr.shadow);
        transition select(hdr.op.optype) {
            PUTREQ: parsed_done;
            default: parse_seq_stat;
        }
    }

    state parse_seq_stat {
        packet.extract(hdr.seq);
        packet.extract(hdr.stat);
        transition parsed_done;
    }

    state parsed_done {
        meta.parsed = 1;
        transition accept;
    }
}

control KvVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

#define SERVE_WORD(i) if (n > i) { hdr.vals[i].setValid(); val_reg.read(hdr.vals[i].word, base + i); }
#define STORE_WORD(i) if (hdr.vals[i].isValid()) { val_reg.write(base + i, hdr.vals[i].word); }
#define LOAD_WORD(i) hdr.vals[i].setValid(); val_reg.read(hdr.vals[i].word, b + i);
#define SAVE_WORD(i) val_reg.write(b + i, hdr.vals[i].word);
#define DROP_WORD(i) hdr.vals[i].setInvalid();

/* The slot's record into the packet: value, seq_hdr(savedseq), stat_hdr(0xFFFF). */
#define LOAD_RECORD \
    vallen_reg.read(t_len, meta.idx); \
    hdr.vallen.setValid(); \
    hdr.vallen.vallen = t_len; \
    n = (t_len + 7) >> 3; \
    base = meta.idx * KV_WORDS; \
    if (n == KV_WORDS) { \
        serve_all_words(base); \
    } else { \
        SERVE_WORD(0) SERVE_WORD(1) SERVE_WORD(2) SERVE_WORD(3) \
        SERVE_WORD(4) SERVE_WORD(5) SERVE_WORD(6) SERVE_WORD(7) \
        SERVE_WORD(8) SERVE_WORD(9) SERVE_WORD(10) SERVE_WORD(11) \
        SERVE_WORD(12) SERVE_WORD(13) SERVE_WORD(14) SERVE_WORD(15) \
    } \
    hdr.seq.setValid(); \
    savedseq_reg.read(hdr.seq.seq, meta.idx); \
    hdr.seq.token = 0; \
    deleted_reg.read(t_del, meta.idx); \
    hdr.stat.setValid(); \
    hdr.stat.stat = t_del == 1 ? 8w0 : 8w1; \
    hdr.stat.nodeidx = 0xFFFF; \
    hdr.stat.padding = 0;

/* The packet's value (none for a delete: DEL) and seq SEQ into the slot; latest := 1. */
#define STORE_RECORD(DEL, SEQ) \
    deleted_reg.write(meta.idx, DEL); \
    savedseq_reg.write(meta.idx, SEQ); \
    latest_reg.write(meta.idx, 1); \
    t_len = 0; \
    if (hdr.vallen.isValid()) { \
        t_len = hdr.vallen.vallen; \
    } \
    vallen_reg.write(meta.idx, t_len); \
    base = meta.idx * KV_WORDS; \
    if (hdr.vals[KV_WORDS - 1].isValid()) { \
        store_all_words(base); \
    } else { \
        STORE_WORD(0) STORE_WORD(1) STORE_WORD(2) STORE_WORD(3) \
        STORE_WORD(4) STORE_WORD(5) STORE_WORD(6) STORE_WORD(7) \
        STORE_WORD(8) STORE_WORD(9) STORE_WORD(10) STORE_WORD(11) \
        STORE_WORD(12) STORE_WORD(13) STORE_WORD(14) STORE_WORD(15) \
    }

/* A sampled hit counts towards the slot's frequency (eviction policy). */
#define COUNT_HIT \
    if (meta.sampled == 1) { \
        frequency_reg.read(t_seq, meta.idx); \
        frequency_reg.write(meta.idx, t_seq + 1); \
    }

/* Count-min sketch + Bloom filter on a sampled uncached request: meta.report = 1 the first
 * time the key is hot. */
#define DETECT_HOT \
    hash(h1, HashAlgorithm.crc32, 32w0, { hdr.op.key }, (bit<32>) KV_CM_WIDTH); \
    hash(h2, HashAlgorithm.crc32, 32w0, { hdr.op.key, 16w0x5bd1 }, (bit<32>) KV_CM_WIDTH); \
    hash(h3, HashAlgorithm.crc16, 32w0, { hdr.op.key }, (bit<32>) KV_CM_WIDTH); \
    hash(h4, HashAlgorithm.csum16, 32w0, { hdr.op.key }, (bit<32>) KV_CM_WIDTH); \
    cm1_reg.read(c1, h1); \
    cm2_reg.read(c2, h2); \
    cm3_reg.read(c3, h3); \
    cm4_reg.read(c4, h4); \
    if (c1 != 0xFFFF) { c1 = c1 + 1; } \
    if (c2 != 0xFFFF) { c2 = c2 + 1; } \
    if (c3 != 0xFFFF) { c3 = c3 + 1; } \
    if (c4 != 0xFFFF) { c4 = c4 + 1; } \
    cm1_reg.write(h1, c1); \
    cm2_reg.write(h2, c2); \
    cm3_reg.write(h3, c3); \
    cm4_reg.write(h4, c4); \
    if (c1 >= meta.hot_threshold && c2 >= meta.hot_threshold && \
        c3 >= meta.hot_threshold && c4 >= meta.hot_threshold) { \
        hash(h1, HashAlgorithm.crc32, 32w0, { hdr.op.key, 8w1 }, (bit<32>) KV_BF_WIDTH); \
        hash(h2, HashAlgorithm.crc32, 32w0, { hdr.op.key, 8w2 }, (bit<32>) KV_BF_WIDTH); \
        hash(h3, HashAlgorithm.crc32, 32w0, { hdr.op.key, 8w3 }, (bit<32>) KV_BF_WIDTH); \
        bf1_reg.read(s1, h1); \
        bf2_reg.read(s2, h2); \
        bf3_reg.read(s3, h3); \
        bf1_reg.write(h1, 1); \
        bf2_reg.write(h2, 1); \
        bf3_reg.write(h3, 1); \
        if (s1 == 0 || s2 == 0 || s3 == 0) { \
            meta.report = 1; \
            kv_ops.count(OPS_HOT_REPORT); \
        } \
    }

control KvIngress(inout headers hdr,
                  inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    counter(512, CounterType.packets_and_bytes) kv_packets;
    counter(4, CounterType.packets) kv_dropped;
    counter(16, CounterType.packets) kv_ops;

    register<bit<8>>(KV_RECORDS) validvalue_reg;
    register<bit<1>>(KV_RECORDS) latest_reg;
    register<bit<1>>(KV_RECORDS) deleted_reg;
    register<bit<32>>(KV_RECORDS) savedseq_reg;
    register<bit<16>>(KV_RECORDS) vallen_reg;
    register<bit<64>>(KV_RECORDS * KV_WORDS) val_reg;
    register<bit<32>>(KV_RECORDS) frequency_reg;
    register<bit<32>>(KV_SEQ_BUCKETS) seq_reg;
    register<bit<16>>(KV_CM_WIDTH) cm1_reg;
    register<bit<16>>(KV_CM_WIDTH) cm2_reg;
    register<bit<16>>(KV_CM_WIDTH) cm3_reg;
    register<bit<16>>(KV_CM_WIDTH) cm4_reg;
    register<bit<1>>(KV_BF_WIDTH) bf1_reg;
    register<bit<1>>(KV_BF_WIDTH) bf2_reg;
    register<bit<1>>(KV_BF_WIDTH) bf3_reg;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    action to_port(bit<9> port) {
        standard_metadata.egress_spec = port;
    }

    table forward {
        key = {
            meta.dst: exact;
        }
        actions = {
            to_port;
            drop;
        }
        size = 1024;
        default_action = drop();
    }

    /* Parameters the switch OS sets (table_set_default): the hot threshold (on sampled
     * requests), sample_all (1: count every request; 0: sample one in two at random), the seq
     * floor (every new seq is above it) and snapshot_token (unused by NetCache; kept so both
     * programs take the same parameters). */
    action set_params(bit<16> hot_threshold, bit<1> sample_all, bit<32> seq_base,
                      bit<32> snapshot_token) {
        meta.hot_threshold = hot_threshold;
        meta.sample_all = sample_all;
        meta.seq_base = seq_base;
        meta.snapshot_token = snapshot_token;
    }

    table kv_params {
        actions = {
            set_params;
        }
        default_action = set_params(10, 0, 0, 0);
    }

    action set_cached(bit<32> idx) {
        meta.is_cached = 1;
        meta.idx = idx;
    }

    action not_cached() {
        meta.is_cached = 0;
    }

    table cache_lookup {
        key = {
            hdr.op.key: exact;
        }
        actions = {
            set_cached;
            not_cached;
        }
        size = KV_RECORDS;
        default_action = not_cached();
    }

    /* Send the packet back where it came from, as if from its destination. */
    action reply_to_sender() {
        bit<48> mac = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = hdr.ethernet.srcAddr;
        hdr.ethernet.srcAddr = mac;
        bit<32> ip = hdr.ipv4.dstAddr;
        hdr.ipv4.dstAddr = hdr.ipv4.srcAddr;
        hdr.ipv4.srcAddr = ip;
        bit<16> port = hdr.udp.dstPort;
        hdr.udp.dstPort = hdr.udp.srcPort;
        hdr.udp.srcPort = port;
        standard_metadata.egress_spec = standard_metadata.ingress_port;
    }

    action set_op(bit<16> op) {
        hdr.op.optype = op;
        hdr.shadow.setValid();
        hdr.shadow.shadowtype = op;
        meta.rewrite = 1;
    }

    /* A full value (16 words, the common 128-byte case) in one action: one step instead
     * of sixteen conditional ones. */
    action serve_all_words(bit<32> b) {
        LOAD_WORD(0) LOAD_WORD(1) LOAD_WORD(2) LOAD_WORD(3)
        LOAD_WORD(4) LOAD_WORD(5) LOAD_WORD(6) LOAD_WORD(7)
        LOAD_WORD(8) LOAD_WORD(9) LOAD_WORD(10) LOAD_WORD(11)
        LOAD_WORD(12) LOAD_WORD(13) LOAD_WORD(14) LOAD_WORD(15)
    }

    /* A full value (16 words) into the slot in one action. */
    action store_all_words(bit<32> b) {
        SAVE_WORD(0) SAVE_WORD(1) SAVE_WORD(2) SAVE_WORD(3)
        SAVE_WORD(4) SAVE_WORD(5) SAVE_WORD(6) SAVE_WORD(7)
        SAVE_WORD(8) SAVE_WORD(9) SAVE_WORD(10) SAVE_WORD(11)
        SAVE_WORD(12) SAVE_WORD(13) SAVE_WORD(14) SAVE_WORD(15)
    }

    action drop_value() {
        hdr.vallen.setInvalid();
        DROP_WORD(0) DROP_WORD(1) DROP_WORD(2) DROP_WORD(3)
        DROP_WORD(4) DROP_WORD(5) DROP_WORD(6) DROP_WORD(7)
        DROP_WORD(8) DROP_WORD(9) DROP_WORD(10) DROP_WORD(11)
        DROP_WORD(12) DROP_WORD(13) DROP_WORD(14) DROP_WORD(15)
    }

    /* Macros below run inside `apply` (p4c's BMv2 back end rejects conditionals around extern
     * calls inside actions). */
    apply {
        if (hdr.ipv4.isValid()) {
            meta.dst = hdr.ipv4.dstAddr;
        } else if (hdr.arp.isValid()) {
            meta.dst = hdr.arp.tpa;
        } else {
            drop();
            return;
        }
        /* Scratch variables of the macros above. */
        bit<16> t_len;
        bit<16> n;
        bit<32> base;
        bit<1> t_del;
        bit<32> t_seq;
        bit<32> h1;
        bit<32> h2;
        bit<32> h3;
        bit<32> h4;
        bit<16> c1;
        bit<16> c2;
        bit<16> c3;
        bit<16> c4;
        bit<1> s1;
        bit<1> s2;
        bit<1> s3;
        forward.apply();
        if (meta.kv == 0) {
            return;
        }
        kv_packets.count((bit<32>) standard_metadata.egress_spec);
        /* Strict parsing: nothing malformed reaches the cache state. */
        if (standard_metadata.parser_error != error.NoError) {
            kv_dropped.count(DROP_TRUNCATED);
            drop();
            return;
        }
        /* Lookups only (no state changes): every parsed key-value packet takes them. */
        kv_params.apply();
        cache_lookup.apply();
        if (meta.large == 1) {
            /* Large-value path: values of 129..8192 bytes are never cached. The datagram must
             * hold exactly its headers (an IP fragment does not: dropped as a length error). */
            if (hdr.vallen.vallen > 8192) {
                kv_dropped.count(DROP_OVERSIZED);
                drop();
                return;
            }
            bit<16> llen = 18 + 2 + (((hdr.vallen.vallen + 7) >> 3) << 3) + 2;
            if (meta.from_server == 1) {
                llen = llen + 12;
            }
            if (hdr.udp.length != llen + 8 || hdr.ipv4.totalLen != llen + 28) {
                kv_dropped.count(DROP_LENGTH);
                drop();
                return;
            }
            if (meta.from_server == 1) {
                /* A large NETCACHE_VALUEUPDATE cannot refresh a copy: refused. */
                kv_ops.count(OPS_UPDATE_REFUSED);
                drop();
                return;
            }
            /* PUTREQ: a seq as every write; a cached copy is invalidated as by any write
             * (latest := 0, savedseq := seq) and stays invalid until a write of a small value
             * refreshes it; the server gets the seq in a seq header in front of the value
             * (TERN_PUTREQ_LARGE_SEQ) and sends no update. */
            hash(meta.bucket, HashAlgorithm.crc32, 32w0, { hdr.op.key }, (bit<32>) KV_SEQ_BUCKETS);
            bit<32> ls;
            seq_reg.read(ls, meta.bucket);
            if (ls < meta.seq_base) {
                ls = meta.seq_base;
            }
            ls = ls + 1;
            seq_reg.write(meta.bucket, ls);
            if (meta.is_cached == 1) {
                validvalue_reg.read(meta.valid, meta.idx);
                if (meta.valid != 0) {
                    latest_reg.write(meta.idx, 0);
                    savedseq_reg.write(meta.idx, ls);
                    kv_ops.count(OPS_LARGE_INVALIDATE);
                }
            }
            hdr.op.optype = TERN_PUTREQ_LARGE_SEQ;
            hdr.lseq.setValid();
            hdr.lseq.seq = ls;
            hdr.lseq.token = 0;
            meta.rewrite = 1;
            kv_ops.count(OPS_LARGE_WRITE);
            return;
        }
        if (meta.parsed == 0) {
            kv_ops.count(OPS_PASS);
            return;
        }
        if (hdr.shadow.isValid() && hdr.shadow.shadowtype != hdr.op.optype) {
            kv_dropped.count(DROP_SHADOWTYPE);
            drop();
            return;
        }
        bit<16> len = 18;
        if (hdr.vallen.isValid()) {
            len = len + 4 + (((hdr.vallen.vallen + 7) >> 3) << 3);
        }
        if (hdr.seq.isValid()) {
            len = len + 12;
        }
        if (hdr.udp.length != len + 8) {
            kv_dropped.count(DROP_LENGTH);
            drop();
            return;
        }

        meta.valid = 0;
        if (meta.is_cached == 1) {
            validvalue_reg.read(meta.valid, meta.idx);
        }
        bit<1> latest = 0;
        if (meta.valid != 0) {
            latest_reg.read(latest, meta.idx);
        }
        /* The key's seq bucket: responses and writes only (a GET hit never needs it). */
        if (meta.from_server == 1 || hdr.op.optype != GETREQ) {
            hash(meta.bucket, HashAlgorithm.crc32, 32w0, { hdr.op.key }, (bit<32>) KV_SEQ_BUCKETS);
        }

        if (meta.from_server == 1) {
            /* NETCACHE_VALUEUPDATE: refresh the copy unless a newer write may exist. */
            bit<32> last;
            seq_reg.read(last, meta.bucket);
            bit<32> saved = 0;
            if (meta.valid == 1) {
                savedseq_reg.read(saved, meta.idx);
            }
            if (meta.valid == 1 && (hdr.seq.seq < saved || hdr.seq.seq < last)) {
                kv_ops.count(OPS_UPDATE_REFUSED);
                drop();
                return;
            }
            if (meta.valid == 1) {
                bit<1> del = 0;
                if (hdr.stat.stat == 0) {
                    del = 1;
                }
                STORE_RECORD(del, hdr.seq.seq)
                kv_ops.count(OPS_UPDATE);
            } else {
                kv_ops.count(OPS_UPDATE_UNCACHED);
            }
            drop_value();
            hdr.seq.setInvalid();
            hdr.stat.setInvalid();
            hdr.op.optype = NETCACHE_VALUEUPDATE_ACK;
            hdr.shadow.setInvalid();
            meta.rewrite = 1;
            reply_to_sender();
            return;
        }

        bit<1> r;
        random(r, 1w0, 1w1);
        meta.sampled = r;
        if (meta.sample_all == 1) {
            meta.sampled = 1;
        }

        if (hdr.op.optype == GETREQ) {
            if (meta.is_cached == 0 && meta.sampled == 1) {
                DETECT_HOT
            }
            if (meta.valid == 1 && latest == 1) {
                LOAD_RECORD
                set_op(GETRES_SEQ);
                reply_to_sender();
                COUNT_HIT
                kv_ops.count(OPS_GET_HIT);
            } else if (meta.is_cached == 1) {
                kv_ops.count(OPS_GET_INVALID);
            } else {
                if (meta.report == 1) {
                    hdr.op.optype = NETCACHE_GETREQ_POP;
                    meta.rewrite = 1;
                }
                kv_ops.count(OPS_GET_MISS);
            }
            return;
        }

        /* PUTREQ / DELREQ: a new seq in the key's bucket. */
        bit<32> s;
        seq_reg.read(s, meta.bucket);
        if (s < meta.seq_base) {
            s = meta.seq_base;
        }
        s = s + 1;
        seq_reg.write(meta.bucket, s);
        bit<16> op;
        if (meta.valid == 1) {
            /* Write-through: invalidate the copy; the server refreshes it after the write. */
            latest_reg.write(meta.idx, 0);
            savedseq_reg.write(meta.idx, s);
            COUNT_HIT
            op = hdr.op.optype == DELREQ ? NETCACHE_DELREQ_SEQ_CACHED : NETCACHE_PUTREQ_SEQ_CACHED;
            kv_ops.count(OPS_WRITE_INVALIDATE);
        } else {
            op = hdr.op.optype == DELREQ ? DELREQ_SEQ : PUTREQ_SEQ;
            kv_ops.count(OPS_WRITE_TO_SERVER);
        }
        set_op(op);
        hdr.seq.setValid();
        hdr.seq.seq = s;
        hdr.seq.token = 0;
    }
}

control KvEgress(inout headers hdr,
                 inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (meta.large == 1) {
            /* The seq header inserted in front of the (unparsed) value. */
            if (hdr.lseq.isValid()) {
                hdr.udp.length = hdr.udp.length + 8;
                hdr.ipv4.totalLen = hdr.ipv4.totalLen + 8;
                hdr.udp.checksum = 0;
            }
        } else if (meta.rewrite == 1) {
            bit<16> len = 18;
            if (hdr.vallen.isValid()) {
                len = len + 2 + (((hdr.vallen.vallen + 7) >> 3) << 3);
            }
            if (hdr.shadow.isValid()) {
                len = len + 2;
            }
            if (hdr.seq.isValid()) {
                len = len + 8;
            }
            if (hdr.stat.isValid()) {
                len = len + 4;
            }
            hdr.udp.length = len + 8;
            hdr.udp.checksum = 0;
            hdr.ipv4.totalLen = len + 28;
        }
    }
}

control KvComputeChecksum(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(meta.rewrite == 1,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control KvDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.arp);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.op);
        packet.emit(hdr.lseq);
        packet.emit(hdr.vallen);
        packet.emit(hdr.vals);
        packet.emit(hdr.shadow);
        packet.emit(hdr.seq);
        packet.emit(hdr.stat);
    }
}

V1Switch(KvParser(), KvVerifyChecksum(), KvIngress(), KvEgress(), KvComputeChecksum(),
         KvDeparser()) main;
