// SPDX-License-Identifier: Apache-2.0
/*
 * netd_hints.h — the one definition of the bytes netd and libnccl-tuner-netd.so exchange:
 * the hint table and the pin protocol spoken over the daemon's Unix socket.
 *
 * netd/nccl/layout.py mirrors every struct here; tests/nccl/test_layout.py compiles
 * tests/layout_probe.c against this header and compares sizes and offsets with the Python side.
 * Any change to a struct is a new NETD_HINTS_LAYOUT_VERSION / NETD_PIN_PROTO_VERSION, and a new
 * table layout is always a new pin protocol version too: netd answers a plugin of another protocol
 * version NEUTRAL without registering it, so ranks with different plugin builds can never split
 * between "applies the table" and "rejects the layout" (their communicator's pin cannot complete).
 *
 * All integers are little-endian, every field is naturally aligned and no struct has implicit
 * padding (the probe checks sizeof against the sum of the fields).
 */
#ifndef NETD_HINTS_H_
#define NETD_HINTS_H_

#include <stdint.h>

/* ---------------------------------------------------------------------------------------------
 * Hint table
 *
 *   struct netd_hints_header                           (64 bytes)
 *   struct netd_hint_entry [node bucket][collective][size bucket]
 *
 * A table says, per (nNodes bucket, collective, message-size bucket), which of NCCL's
 * (algorithm, protocol) pairs to prefer or forbid. Entries never *add* a pair NCCL has marked
 * unavailable (-1.0) and never leave a cost table without an available pair.
 * ------------------------------------------------------------------------------------------- */

#define NETD_HINTS_MAGIC 0x5448444EU /* "NDHT" as bytes on a little-endian host */
#define NETD_HINTS_LAYOUT_VERSION 1

#define NETD_HINTS_NUM_COLLS 5 /* ncclFunc_t 0..4: Broadcast Reduce AllGather ReduceScatter AllReduce */
#define NETD_HINTS_NUM_SIZE_BUCKETS 32
#define NETD_HINTS_NUM_NODE_BUCKETS 12
/* Size bucket of nBytes: floor(log2(nBytes)) - (NETD_HINTS_SIZE_LOG2_MIN - 1), clamped to
 * [0, 31]. Bucket 0 holds everything below 1 KiB, bucket k (1..30) holds [2^(9+k), 2^(10+k)),
 * bucket 31 holds 1 TiB and more. */
#define NETD_HINTS_SIZE_LOG2_MIN 10
/* Node bucket of nNodes: ceil(log2(nNodes)), clamped to [0, 11]: 1 node -> 0, 2 -> 1, 3..4 -> 2,
 * 5..8 -> 3, ..., 1025 and more -> 11. */

#define NETD_HINTS_NUM_ALGOS 7  /* NCCL's TREE RING COLLNET_DIRECT COLLNET_CHAIN NVLS NVLS_TREE PAT */
#define NETD_HINTS_NUM_PROTOS 3 /* NCCL's LL LL128 SIMPLE */
#define NETD_HINTS_FORBID_BITS (NETD_HINTS_NUM_ALGOS * NETD_HINTS_NUM_PROTOS) /* 21 */
#define NETD_HINTS_MAX_CHANNELS 64

#define NETD_HINTS_ENTRIES (NETD_HINTS_NUM_NODE_BUCKETS * NETD_HINTS_NUM_COLLS * NETD_HINTS_NUM_SIZE_BUCKETS)
#define NETD_HINTS_TABLE_BYTES (64 + NETD_HINTS_ENTRIES * 8) /* header + entries = 15424 */

/* entry.flags */
#define NETD_HINT_F_PIN 0x01U /* set the preferred pair's cost to 0.0 (a hard preference) */
#define NETD_HINT_F_ALL 0x01U

/*
 * One hint. Applied to NCCL's cost table in this order:
 *   1. algo >= 0: the hint is about that algorithm. If no pair of it is available (>= 0 and not
 *      forbidden by this entry; for proto >= 0 exactly that pair), the whole entry is skipped:
 *      NCCL keeps its own choice.
 *   2. forbid: every pair whose bit (algo * 3 + proto) is set becomes -1.0 — unless that would
 *      leave no pair >= 0 in the table, in which case nothing is forbidden.
 *   3. flags & NETD_HINT_F_PIN: the preferred pair (proto >= 0), or the cheapest available pair
 *      of algo (proto == -1), is set to 0.0 so that it wins.
 *   4. n_channels > 0 and the entry applied: *nChannels = n_channels.
 * algo == -1 with a forbid mask forbids unconditionally (still never emptying the table).
 * An all-default entry {-1, -1, 0, 0, 0} leaves the table untouched.
 */
struct netd_hint_entry {
    int8_t algo;        /* 0..6, or -1: no algorithm preference */
    int8_t proto;       /* 0..2, or -1: any protocol of algo */
    uint8_t n_channels; /* 0: NCCL decides; 1..64 */
    uint8_t flags;      /* NETD_HINT_F_* */
    uint32_t forbid;    /* bit a*3+p forbids (a, p); only bits 0..20 may be set */
};

struct netd_hints_header {
    uint32_t magic;          /* NETD_HINTS_MAGIC */
    uint16_t layout_version; /* NETD_HINTS_LAYOUT_VERSION */
    uint16_t header_size;    /* sizeof(struct netd_hints_header) */
    uint32_t total_size;     /* header + entries, bytes */
    uint16_t n_colls;        /* NETD_HINTS_NUM_COLLS */
    uint16_t n_size_buckets; /* NETD_HINTS_NUM_SIZE_BUCKETS */
    uint16_t n_node_buckets; /* NETD_HINTS_NUM_NODE_BUCKETS */
    uint16_t entry_size;     /* sizeof(struct netd_hint_entry) */
    uint16_t size_log2_min;  /* NETD_HINTS_SIZE_LOG2_MIN */
    uint16_t flags;          /* reserved, 0 */
    uint64_t table_version;  /* first 8 bytes (little-endian) of SHA-256 over the entries */
    int64_t generated_at_ns; /* producer's wall clock (CLOCK_REALTIME), ns */
    uint32_t valid_for_ms;   /* 0: never stale; else stale when pinned more than this after generation */
    uint32_t reserved0;      /* 0 */
    uint64_t producer;       /* informative: hash of the producing host's name */
    uint32_t reserved1;      /* 0 */
    uint32_t crc32;          /* CRC-32 (zlib) of header bytes [0, 60) followed by the entries */
};

/* ---------------------------------------------------------------------------------------------
 * Pin protocol (plugin <-> local netd over a SOCK_STREAM Unix socket, one request per connection)
 *
 * plugin:  struct netd_pin_request
 * netd:    struct netd_pin_ack          "I may register you" (sent before registering; see below)
 * netd:    struct netd_pin_response, then table_size bytes of hint table when status is APPLY
 *
 * Every message starts with (magic, version, size). A peer that sees another version answers or
 * reads it as NEUTRAL *without registering*: netd answers a request of another version with a
 * response in its own layout and status NEUTRAL, and the plugin reads any answer of another
 * version as that. So plugins and daemons of different versions leave NCCL alone, never fail it.
 *
 * Registration is fenced by time on the host's CLOCK_MONOTONIC, which the plugin and the daemon
 * share: the request carries `register_by_ns`; netd writes the ACK, *then* reads the clock and
 * registers only if it is still before register_by_ns (else it answers NEUTRAL, unregistered).
 * The plugin waits for the ACK until register_by_ns and checks once more after it: no ACK by then
 * means the ACK was written after register_by_ns, so the clock check that follows it fails and the
 * rank is provably not registered (a wedged daemon that never accepts costs at most that wait).
 * `deadline_ns` is when the plugin stops waiting for the verdict: every authority decides a pin
 * before the earliest deadline of its members (minus a margin), so registered ranks get it in time.
 *
 * Every rank of a communicator registers under (comm_id, n_ranks, n_nodes) with a random
 * `member` id. The pin authority answers every member of a pin with the same final verdict:
 *   APPLY    all n_ranks members registered in time: use the first asker's table (or, when the
 *            members pinned a static table, that table: `table_digest` names it);
 *   NEUTRAL  the pin could not complete (a rank never asked, no pin service, no table, members
 *            with different static tables): leave NCCL untouched. A pin completes only when *every*
 *            rank registered, so a rank that could not register knows its peers are NEUTRAL too;
 *   FAIL     this rank may be registered but netd has no verdict for it (the pin service did not
 *            answer in time): the plugin leaves NCCL alone and warns. (Protocol 1's FAIL failed init.)
 * A registration for a comm id whose pin already completed starts the next `generation` (a rerun
 * with the same NCCL_COMM_ID); one whose pin was abandoned gets that NEUTRAL verdict.
 * ------------------------------------------------------------------------------------------- */

#define NETD_PIN_REQUEST_MAGIC 0x51504E44U  /* "DNPQ" */
#define NETD_PIN_ACK_MAGIC 0x41504E44U      /* "DNPA" */
#define NETD_PIN_RESPONSE_MAGIC 0x52504E44U /* "DNPR" */
#define NETD_PIN_PROTO_VERSION 2
#define NETD_PIN_REASON_LEN 80
#define NETD_PIN_MAX_MESSAGE 4096 /* netd reads at most this many request bytes of any version */

enum netd_pin_status {
    NETD_PIN_APPLY = 0,
    NETD_PIN_NEUTRAL = 1,
    NETD_PIN_FAIL = 2,
};

/* The first 8 bytes of every message of every protocol version. */
struct netd_pin_prefix {
    uint32_t magic;
    uint16_t version;
    uint16_t size; /* of the whole message (without a following table) */
};

struct netd_pin_request {
    uint32_t magic;   /* NETD_PIN_REQUEST_MAGIC */
    uint16_t version; /* NETD_PIN_PROTO_VERSION */
    uint16_t size;    /* sizeof(struct netd_pin_request) */
    uint64_t comm_id; /* NCCL's commId (comm->commHash), identical on every rank */
    uint64_t n_ranks;
    uint64_t n_nodes;
    uint64_t member;        /* random per init call; identifies this rank's registration */
    uint32_t timeout_ms;    /* informative: the plugin's whole budget */
    uint32_t pid;           /* informative */
    int64_t register_by_ns; /* CLOCK_MONOTONIC: netd must not register this rank after it */
    int64_t deadline_ns;    /* CLOCK_MONOTONIC: the plugin stops waiting for the verdict */
    uint64_t static_digest; /* 0: daemon mode; else the first 8 bytes of the static table's SHA-256 */
};

struct netd_pin_ack {
    uint32_t magic;   /* NETD_PIN_ACK_MAGIC */
    uint16_t version; /* NETD_PIN_PROTO_VERSION */
    uint16_t size;    /* sizeof(struct netd_pin_ack) */
};

struct netd_pin_response {
    uint32_t magic;                   /* NETD_PIN_RESPONSE_MAGIC */
    uint16_t version;                 /* NETD_PIN_PROTO_VERSION */
    uint16_t size;                    /* sizeof(struct netd_pin_response) */
    uint32_t status;                  /* enum netd_pin_status */
    uint32_t table_size;              /* bytes of hint table that follow (APPLY only, else 0) */
    uint64_t comm_id;                 /* echo of the request */
    int64_t pinned_at_ns;             /* pin authority's wall clock when the first rank asked */
    uint64_t generation;              /* which pin of this comm id (1, 2, ... for reruns) */
    uint64_t table_digest;            /* APPLY of a static pin: the members' static_digest; else 0 */
    char reason[NETD_PIN_REASON_LEN]; /* NUL-terminated, for the log */
};

#endif /* NETD_HINTS_H_ */
