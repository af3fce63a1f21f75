/* madinc.p4 — MADINC's multitenant in-network cache (../shared/reference/kv-caching.md §5) for
 * tern, in the MADINC extension of tern's key-value wire format (crates/tern-kv/PROTOCOL.md,
 * "MADINC extension": madinc_hdr = op u16, tenant u16, tag u32, key 16 bytes). Plain P4-16 +
 * v1model (no tern-only extensions). Forwarding and the strict-parsing rule are those of
 * netcache.p4 (p4/kv/README.md).
 *
 * Stages, for MADINC packets (UDP to or from ports 1152..1279 whose op is 0x0e00..0x0e21):
 *   1. tenant lookup (table `tenant`, exact on the tenant id → its secret tag and hot
 *      threshold): an unknown tenant, or a tag that is not the tenant's (forged), is dropped and
 *      counted (mad_dropped 3 / 4) before it touches any cache state;
 *   2. cache lookup (table `cache_lookup`, exact on (tenant, key) → a global value slot). Value
 *      memory is one register array of MAD_PAGES pages of 128 values (16 words of 8 bytes per
 *      value; slot s = page × 128 + offset). `page_owner_reg[page]` = tenant + 1 of the page's
 *      owner (0 free), written by the control plane on PAGE_ALLOC/PAGE_FREE; a lookup entry that
 *      points into a page the tenant does not own is refused (mad_dropped 5), so even a wrong
 *      control-plane entry cannot serve one tenant another's value;
 *   3. READ_REQUEST hit (slot valid): answered by the switch with READ_REPLY (stat 1, source
 *      0xFFFF, the slot's value); cached but invalid, or uncached: on to the store. An uncached
 *      read counts in a count-min sketch (4 rows, 16 bit, saturating) on (tenant, key); when all
 *      four counts reach the tenant's threshold a Bloom filter (3 × 1 bit) on (tenant, key) lets
 *      the first crossing through only: an ingress-to-egress clone to session MAD_CPU_SESSION
 *      (the controller's port, `mirroring_add`) becomes HOT_REPORT (switch id, frequency);
 *   4. WRITE_REQUEST (write-through, as NetCache): a cached item's slot is invalidated, its
 *      write mark set, and the write goes on to the store; the store's WRITE_REPLY, passing
 *      back, invalidates and marks the slot again. The controller refreshes the copy by
 *      arming the slot (mark := 0, through the runtime), reading the store, then writing the
 *      value with valid := 1 only if the mark is still 0 — a write that passed in between
 *      (request or reply) makes the refresh stale, never an older value valid;
 *   5. every other MADINC op (read replies, control, page messages) is forwarded unchanged.
 * Strict parsing: truncated (0), UDP length ≠ the op's headers (1), value over 128 bytes (2) are
 * dropped and counted in mad_dropped. The controller resets the sketch and the Bloom filter
 * periodically (register_reset). */
#include <core.p4>
#include <v1model.p4>

#ifndef MAD_PAGES
#define MAD_PAGES 64
#endif
#define MAD_PAGE_VALUES 128
#define MAD_SLOTS (MAD_PAGES * MAD_PAGE_VALUES)
#ifndef MAD_TENANTS
#define MAD_TENANTS 4096
#endif
#ifndef MAD_CM_WIDTH
#define MAD_CM_WIDTH 65536
#endif
#ifndef MAD_BF_WIDTH
#define MAD_BF_WIDTH 262144
#endif
#define MAD_WORDS 16
#define MAD_CPU_SESSION 250

const bit<16> TYPE_IPV4 = 0x0800;
const bit<16> TYPE_ARP  = 0x0806;
const bit<8>  PROTO_UDP = 17;

const bit<16> READ_REQUEST = 0x0e00;
const bit<16> READ_REPLY = 0x0e01;
const bit<16> WRITE_REQUEST = 0x0e02;
const bit<16> WRITE_REPLY = 0x0e03;
const bit<16> HOT_REPORT = 0x0e04;

/* mad_dropped counter indexes. */
const bit<32> DROP_TRUNCATED = 0;
const bit<32> DROP_LENGTH = 1;
const bit<32> DROP_OVERSIZED = 2;
const bit<32> DROP_UNKNOWN_TENANT = 3;
const bit<32> DROP_FORGED_TAG = 4;
const bit<32> DROP_FOREIGN_SLOT = 5;

/* mad_ops counter indexes. */
const bit<32> OPS_READ_HIT = 0;
const bit<32> OPS_READ_MISS = 1;
const bit<32> OPS_READ_INVALID = 2;
const bit<32> OPS_WRITE_INVALIDATE = 3;
const bit<32> OPS_WRITE_TO_STORE = 4;
const bit<32> OPS_HOT_REPORT = 5;
const bit<32> OPS_PASS = 6;
const bit<32> OPS_WRITE_REPLY_MARK = 7;

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

header madinc_t {
    bit<16>  optype;
    bit<16>  tenant;
    bit<32>  tag;
    bit<128> key;
}

/* READ_REPLY's fields before the value. */
header reply_t {
    bit<8>  stat;
    bit<16> source;
}

header hot_t {
    bit<16> switch_id;
    bit<16> frequency;
}

header vallen_t {
    bit<16> vallen;
}

header val_t {
    bit<64> word;
}

struct metadata {
    bit<32> dst;
    bit<1>  mad;
    /* The op is one the switch acts on (its length is checked). */
    bit<1>  parsed;
    bit<8>  words;
    bit<1>  rewrite;
    bit<32> secret;
    bit<16> hot_threshold;
    bit<1>  is_cached;
    bit<32> slot;
    @field_list(1)
    bit<16> switch_id;
    @field_list(1)
    bit<16> frequency;
}

struct headers {
    ethernet_t       ethernet;
    arp_t            arp;
    ipv4_t           ipv4;
    udp_t            udp;
    madinc_t         mad;
    reply_t          reply;
    hot_t            hot;
    vallen_t         vallen;
    val_t[MAD_WORDS] vals;
}

parser MadParser(packet_in packet,
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
            (0x0480 &&& 0xFF80, _): parse_op;
            (_, 0x0480 &&& 0xFF80): parse_op;
            default: accept;
        }
    }

    /* Look at the op first: only MADINC ops (0x0e00..0x0e3f) are extracted. */
    state parse_op {
        transition select(packet.lookahead<bit<16>>()) {
            0x0e00 &&& 0xFFC0: parse_madinc;
            default: accept;
        }
    }

    state parse_madinc {
        meta.mad = 1;
        packet.extract(hdr.mad);
        transition select(hdr.mad.optype) {
            READ_REQUEST: parsed_done;
            WRITE_REQUEST: parse_vallen;
            WRITE_REPLY: parse_write_reply;
            default: accept;
        }
    }

    state parse_write_reply {
        packet.extract(hdr.reply);
        transition parsed_done;
    }

    state parse_vallen {
        packet.extract(hdr.vallen);
        meta.words = (bit<8>) ((hdr.vallen.vallen + 7) >> 3);
        transition select(hdr.vallen.vallen) {
            0: parsed_done;
            0 &&& 0xFF80: parse_words;
            128: parse_words;
            /* Oversized: stop here; ingress drops it. */
            default: accept;
        }
    }

    state parse_words {
        packet.extract(hdr.vals.next);
        meta.words = meta.words - 1;
        transition select(meta.words) {
            0: parsed_done;
            default: parse_words;
        }
    }

    state parsed_done {
        meta.parsed = 1;
        transition accept;
    }
}

control MadVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

#define SERVE_WORD(i) if (n > i) { hdr.vals[i].setValid(); val_reg.read(hdr.vals[i].word, base + i); }

control MadIngress(inout headers hdr,
                   inout metadata meta,
                   inout standard_metadata_t standard_metadata) {
    counter(8, CounterType.packets) mad_dropped;
    counter(8, CounterType.packets) mad_ops;
    /* Per tenant (index = tenant id mod MAD_TENANTS): reads answered by this switch. */
    counter(MAD_TENANTS, CounterType.packets) tenant_hits;

    register<bit<32>>(MAD_PAGES) page_owner_reg;
    register<bit<1>>(MAD_SLOTS) valid_reg;
    /* Set by every write of the slot's item passing (request or reply); cleared by the
     * controller's CONTROL_ARM; a CONTROL_UPDATE applies only while it is 0. */
    register<bit<1>>(MAD_SLOTS) wmark_reg;
    register<bit<16>>(MAD_SLOTS) vallen_reg;
    register<bit<64>>(MAD_SLOTS * MAD_WORDS) val_reg;
    register<bit<16>>(MAD_CM_WIDTH) cm1_reg;
    register<bit<16>>(MAD_CM_WIDTH) cm2_reg;
    register<bit<16>>(MAD_CM_WIDTH) cm3_reg;
    register<bit<16>>(MAD_CM_WIDTH) cm4_reg;
    register<bit<1>>(MAD_BF_WIDTH) bf1_reg;
    register<bit<1>>(MAD_BF_WIDTH) bf2_reg;
    register<bit<1>>(MAD_BF_WIDTH) bf3_reg;

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

    /* This switch's id in HOT_REPORT (set by the control plane with table_set_default). */
    action set_switch(bit<16> switch_id) {
        meta.switch_id = switch_id;
    }

    table mad_params {
        actions = {
            set_switch;
        }
        default_action = set_switch(0);
    }

    action set_tenant(bit<32> secret, bit<16> hot_threshold) {
        meta.secret = secret;
        meta.hot_threshold = hot_threshold;
    }

    action unknown_tenant() {
        mad_dropped.count(DROP_UNKNOWN_TENANT);
        mark_to_drop(standard_metadata);
    }

    table tenant {
        key = {
            hdr.mad.tenant: exact;
        }
        actions = {
            set_tenant;
            unknown_tenant;
        }
        size = MAD_TENANTS;
        default_action = unknown_tenant();
    }

    action set_slot(bit<32> slot) {
        meta.is_cached = 1;
        meta.slot = slot;
    }

    action not_cached() {
        meta.is_cached = 0;
    }

    table cache_lookup {
        key = {
            hdr.mad.tenant: exact;
            hdr.mad.key: exact;
        }
        actions = {
            set_slot;
            not_cached;
        }
        size = MAD_SLOTS;
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

    apply {
        if (hdr.ipv4.isValid()) {
            meta.dst = hdr.ipv4.dstAddr;
        } else if (hdr.arp.isValid()) {
            meta.dst = hdr.arp.tpa;
        } else {
            drop();
            return;
        }
        forward.apply();
        if (meta.mad == 0) {
            return;
        }
        /* Strict parsing: nothing malformed reaches the cache state. */
        if (standard_metadata.parser_error != error.NoError) {
            mad_dropped.count(DROP_TRUNCATED);
            drop();
            return;
        }
        if (hdr.vallen.isValid() && hdr.vallen.vallen > 128) {
            mad_dropped.count(DROP_OVERSIZED);
            drop();
            return;
        }
        if (meta.parsed == 0) {
            mad_ops.count(OPS_PASS);
            return;
        }
        bit<16> len = 24;
        if (hdr.vallen.isValid()) {
            len = len + 2 + (((hdr.vallen.vallen + 7) >> 3) << 3);
        }
        if (hdr.reply.isValid()) {
            len = len + 3;
        }
        if (hdr.udp.length != len + 8) {
            mad_dropped.count(DROP_LENGTH);
            drop();
            return;
        }

        /* 1. Tenant: known, and the tag is its secret. */
        switch (tenant.apply().action_run) {
            unknown_tenant: {
                return;
            }
        }
        if (hdr.mad.tag != meta.secret) {
            mad_dropped.count(DROP_FORGED_TAG);
            drop();
            return;
        }
        mad_params.apply();

        /* 2. Cache lookup on (tenant, key); the slot must lie in a page the tenant owns. */
        cache_lookup.apply();
        bit<1> valid = 0;
        if (meta.is_cached == 1) {
            bit<32> page = meta.slot >> 7;
            bit<32> owner = 0;
            if (page < MAD_PAGES) {
                page_owner_reg.read(owner, page);
            }
            if (owner != ((bit<32>) hdr.mad.tenant) + 1) {
                mad_dropped.count(DROP_FOREIGN_SLOT);
                drop();
                return;
            }
            valid_reg.read(valid, meta.slot);
        }

        if (hdr.mad.optype == WRITE_REPLY) {
            /* The store's answer to a write: the write is done, so whatever value the
             * controller read before this point may be older; invalidate and mark. */
            if (meta.is_cached == 1) {
                valid_reg.write(meta.slot, 0);
                wmark_reg.write(meta.slot, 1);
                mad_ops.count(OPS_WRITE_REPLY_MARK);
            } else {
                mad_ops.count(OPS_PASS);
            }
            return;
        }
        if (hdr.mad.optype == WRITE_REQUEST) {
            /* Write-through: invalidate the copy and mark the slot; the controller refreshes
             * it. */
            if (meta.is_cached == 1) {
                valid_reg.write(meta.slot, 0);
                wmark_reg.write(meta.slot, 1);
                mad_ops.count(OPS_WRITE_INVALIDATE);
            } else {
                mad_ops.count(OPS_WRITE_TO_STORE);
            }
            return;
        }

        /* READ_REQUEST. */
        if (valid == 1) {
            bit<16> t_len;
            vallen_reg.read(t_len, meta.slot);
            hdr.reply.setValid();
            hdr.reply.stat = 1;
            hdr.reply.source = 0xFFFF;
            hdr.vallen.setValid();
            hdr.vallen.vallen = t_len;
            bit<16> n = (t_len + 7) >> 3;
            bit<32> base = meta.slot * MAD_WORDS;
            SERVE_WORD(0) SERVE_WORD(1) SERVE_WORD(2) SERVE_WORD(3)
            SERVE_WORD(4) SERVE_WORD(5) SERVE_WORD(6) SERVE_WORD(7)
            SERVE_WORD(8) SERVE_WORD(9) SERVE_WORD(10) SERVE_WORD(11)
            SERVE_WORD(12) SERVE_WORD(13) SERVE_WORD(14) SERVE_WORD(15)
            hdr.mad.optype = READ_REPLY;
            meta.rewrite = 1;
            reply_to_sender();
            mad_ops.count(OPS_READ_HIT);
            tenant_hits.count(((bit<32>) hdr.mad.tenant) % MAD_TENANTS);
            return;
        }
        if (meta.is_cached == 1) {
            mad_ops.count(OPS_READ_INVALID);
            return;
        }
        mad_ops.count(OPS_READ_MISS);

        /* Heavy-hitter detection on (tenant, key): count-min sketch, then a Bloom filter so a
         * hot item is reported once. */
        bit<32> h1;
        bit<32> h2;
        bit<32> h3;
        bit<32> h4;
        bit<16> c1;
        bit<16> c2;
        bit<16> c3;
        bit<16> c4;
        hash(h1, HashAlgorithm.crc32, 32w0, { hdr.mad.tenant, hdr.mad.key }, (bit<32>) MAD_CM_WIDTH);
        hash(h2, HashAlgorithm.crc32, 32w0, { hdr.mad.tenant, hdr.mad.key, 16w0x5bd1 }, (bit<32>) MAD_CM_WIDTH);
        hash(h3, HashAlgorithm.crc16, 32w0, { hdr.mad.tenant, hdr.mad.key }, (bit<32>) MAD_CM_WIDTH);
        hash(h4, HashAlgorithm.csum16, 32w0, { hdr.mad.tenant, hdr.mad.key }, (bit<32>) MAD_CM_WIDTH);
        cm1_reg.read(c1, h1);
        cm2_reg.read(c2, h2);
        cm3_reg.read(c3, h3);
        cm4_reg.read(c4, h4);
        if (c1 != 0xFFFF) { c1 = c1 + 1; }
        if (c2 != 0xFFFF) { c2 = c2 + 1; }
        if (c3 != 0xFFFF) { c3 = c3 + 1; }
        if (c4 != 0xFFFF) { c4 = c4 + 1; }
        cm1_reg.write(h1, c1);
        cm2_reg.write(h2, c2);
        cm3_reg.write(h3, c3);
        cm4_reg.write(h4, c4);
        if (c1 >= meta.hot_threshold && c2 >= meta.hot_threshold &&
            c3 >= meta.hot_threshold && c4 >= meta.hot_threshold) {
            bit<1> s1;
            bit<1> s2;
            bit<1> s3;
            hash(h1, HashAlgorithm.crc32, 32w0, { hdr.mad.tenant, hdr.mad.key, 8w1 }, (bit<32>) MAD_BF_WIDTH);
            hash(h2, HashAlgorithm.crc32, 32w0, { hdr.mad.tenant, hdr.mad.key, 8w2 }, (bit<32>) MAD_BF_WIDTH);
            hash(h3, HashAlgorithm.crc32, 32w0, { hdr.mad.tenant, hdr.mad.key, 8w3 }, (bit<32>) MAD_BF_WIDTH);
            bf1_reg.read(s1, h1);
            bf2_reg.read(s2, h2);
            bf3_reg.read(s3, h3);
            bf1_reg.write(h1, 1);
            bf2_reg.write(h2, 1);
            bf3_reg.write(h3, 1);
            if (s1 == 0 || s2 == 0 || s3 == 0) {
                bit<16> f = c1;
                if (c2 < f) { f = c2; }
                if (c3 < f) { f = c3; }
                if (c4 < f) { f = c4; }
                meta.frequency = f;
                mad_ops.count(OPS_HOT_REPORT);
                clone_preserving_field_list(CloneType.I2E, MAD_CPU_SESSION, 1);
            }
        }
    }
}

control MadEgress(inout headers hdr,
                  inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        /* The ingress clone of a hot read becomes the HOT_REPORT to the controller. */
        if (standard_metadata.instance_type == 1) {
            hdr.mad.optype = HOT_REPORT;
            hdr.hot.setValid();
            hdr.hot.switch_id = meta.switch_id;
            hdr.hot.frequency = meta.frequency;
            meta.rewrite = 1;
        }
        if (meta.rewrite == 1) {
            bit<16> len = 24;
            if (hdr.reply.isValid()) {
                len = len + 3;
            }
            if (hdr.hot.isValid()) {
                len = len + 4;
            }
            if (hdr.vallen.isValid()) {
                len = len + 2 + (((hdr.vallen.vallen + 7) >> 3) << 3);
            }
            hdr.udp.length = len + 8;
            hdr.udp.checksum = 0;
            hdr.ipv4.totalLen = len + 28;
        }
    }
}

control MadComputeChecksum(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(meta.rewrite == 1,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control MadDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.arp);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.mad);
        packet.emit(hdr.reply);
        packet.emit(hdr.hot);
        packet.emit(hdr.vallen);
        packet.emit(hdr.vals);
    }
}

V1Switch(MadParser(), MadVerifyChecksum(), MadIngress(), MadEgress(), MadComputeChecksum(),
         MadDeparser()) main;
