// SPDX-License-Identifier: Apache-2.0
/*
 * layout_probe.c — prints what the compiler makes of netd_hints.h as JSON: constants, and the
 * size and every field's offset and size per struct. tests/nccl/test_layout.py compares this
 * with netd/nccl/layout.py.
 */
#include <stddef.h>
#include <stdio.h>

#include "netd_hints.h"

#define FIELD(type, field)                                                                  \
    printf("%s\"%s\": [%zu, %zu]", first ? "" : ", ", #field, offsetof(struct type, field), \
           sizeof(((struct type *)0)->field)),                                              \
        first = 0
#define STRUCT_BEGIN(type) \
    printf("  \"%s\": {\"size\": %zu, \"fields\": {", #type, sizeof(struct type)), first = 1
#define STRUCT_END(last) printf("}}%s\n", last ? "" : ",")
#define CONST(name) printf("    \"%s\": %lld,\n", #name, (long long)(name))

int main(void)
{
    int first;
    printf("{\n  \"constants\": {\n");
    CONST(NETD_HINTS_MAGIC);
    CONST(NETD_HINTS_LAYOUT_VERSION);
    CONST(NETD_HINTS_NUM_COLLS);
    CONST(NETD_HINTS_NUM_SIZE_BUCKETS);
    CONST(NETD_HINTS_NUM_NODE_BUCKETS);
    CONST(NETD_HINTS_SIZE_LOG2_MIN);
    CONST(NETD_HINTS_NUM_ALGOS);
    CONST(NETD_HINTS_NUM_PROTOS);
    CONST(NETD_HINTS_FORBID_BITS);
    CONST(NETD_HINTS_MAX_CHANNELS);
    CONST(NETD_HINTS_ENTRIES);
    CONST(NETD_HINTS_TABLE_BYTES);
    CONST(NETD_HINT_F_PIN);
    CONST(NETD_HINT_F_ALL);
    CONST(NETD_PIN_REQUEST_MAGIC);
    CONST(NETD_PIN_RESPONSE_MAGIC);
    CONST(NETD_PIN_ACK_MAGIC);
    CONST(NETD_PIN_MAX_MESSAGE);
    CONST(NETD_PIN_PROTO_VERSION);
    CONST(NETD_PIN_REASON_LEN);
    CONST(NETD_PIN_APPLY);
    CONST(NETD_PIN_NEUTRAL);
    printf("    \"NETD_PIN_FAIL\": %d\n  },\n", (int)NETD_PIN_FAIL);
    STRUCT_BEGIN(netd_hint_entry);
    FIELD(netd_hint_entry, algo);
    FIELD(netd_hint_entry, proto);
    FIELD(netd_hint_entry, n_channels);
    FIELD(netd_hint_entry, flags);
    FIELD(netd_hint_entry, forbid);
    STRUCT_END(0);
    STRUCT_BEGIN(netd_hints_header);
    FIELD(netd_hints_header, magic);
    FIELD(netd_hints_header, layout_version);
    FIELD(netd_hints_header, header_size);
    FIELD(netd_hints_header, total_size);
    FIELD(netd_hints_header, n_colls);
    FIELD(netd_hints_header, n_size_buckets);
    FIELD(netd_hints_header, n_node_buckets);
    FIELD(netd_hints_header, entry_size);
    FIELD(netd_hints_header, size_log2_min);
    FIELD(netd_hints_header, flags);
    FIELD(netd_hints_header, table_version);
    FIELD(netd_hints_header, generated_at_ns);
    FIELD(netd_hints_header, valid_for_ms);
    FIELD(netd_hints_header, reserved0);
    FIELD(netd_hints_header, producer);
    FIELD(netd_hints_header, reserved1);
    FIELD(netd_hints_header, crc32);
    STRUCT_END(0);
    STRUCT_BEGIN(netd_pin_request);
    FIELD(netd_pin_request, magic);
    FIELD(netd_pin_request, version);
    FIELD(netd_pin_request, size);
    FIELD(netd_pin_request, comm_id);
    FIELD(netd_pin_request, n_ranks);
    FIELD(netd_pin_request, n_nodes);
    FIELD(netd_pin_request, member);
    FIELD(netd_pin_request, timeout_ms);
    FIELD(netd_pin_request, pid);
    FIELD(netd_pin_request, register_by_ns);
    FIELD(netd_pin_request, deadline_ns);
    FIELD(netd_pin_request, static_digest);
    STRUCT_END(0);
    STRUCT_BEGIN(netd_pin_ack);
    FIELD(netd_pin_ack, magic);
    FIELD(netd_pin_ack, version);
    FIELD(netd_pin_ack, size);
    STRUCT_END(0);
    STRUCT_BEGIN(netd_pin_response);
    FIELD(netd_pin_response, magic);
    FIELD(netd_pin_response, version);
    FIELD(netd_pin_response, size);
    FIELD(netd_pin_response, status);
    FIELD(netd_pin_response, table_size);
    FIELD(netd_pin_response, comm_id);
    FIELD(netd_pin_response, pinned_at_ns);
    FIELD(netd_pin_response, generation);
    FIELD(netd_pin_response, table_digest);
    FIELD(netd_pin_response, reason);
    STRUCT_END(1);
    printf("}\n");
    return 0;
}
