// SPDX-License-Identifier: Apache-2.0
/* The RoCEv2 invariant CRC (ICRC) of a packet sent over IPv4, as a RoCE NIC computes it (IBTA vol. 1,
 * annex A17 "RoCEv2", with the ICRC of section 7.8.1).
 *
 * A CRC-32 (the Ethernet polynomial 0x04C11DB7, reflected, initial value all ones, final complement)
 * over a pseudo-packet: 8 bytes of ones in place of the LRH RoCEv2 has not, the IPv4 header with the
 * fields routers change (TOS: DSCP and ECN; TTL; header checksum) set to ones, the UDP header with its
 * checksum set to ones, the BTH with its byte 4 (FECN, BECN, reserved) set to ones, then the rest of
 * the transport packet up to the ICRC. The CRC goes on the wire least significant byte first.
 * tests/lab/test_wire.py checks it with netd/lab/wire.py, written separately from the annex and
 * validated on a CNP captured from a ConnectX-4 Lx.
 */
#ifndef NETD_ROCE_ICRC_H
#define NETD_ROCE_ICRC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static uint32_t icrc_table[256];

static void icrc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
        icrc_table[i] = c;
    }
}

static uint32_t icrc_update(uint32_t crc, const uint8_t *p, size_t n)
{
    while (n--)
        crc = icrc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc;
}

/* The ICRC of a transport packet `tp` (BTH .. payload, `n` bytes, ICRC excluded) that leaves in the IPv4
 * header `ip` (20 bytes, no options) and UDP header `udp` (8 bytes) as they will be on the wire, before
 * any router touches them. Writes the 4 ICRC bytes to `out`. */
static void roce_icrc_v4(const uint8_t ip[20], const uint8_t udp[8], const uint8_t *tp, size_t n,
                         uint8_t out[4])
{
    uint8_t pseudo[8 + 20 + 8 + 12];
    memset(pseudo, 0xff, 8);
    memcpy(pseudo + 8, ip, 20);
    pseudo[8 + 1] = 0xff;                   /* TOS */
    pseudo[8 + 8] = 0xff;                   /* TTL */
    pseudo[8 + 10] = pseudo[8 + 11] = 0xff; /* header checksum */
    memcpy(pseudo + 28, udp, 8);
    pseudo[28 + 6] = pseudo[28 + 7] = 0xff; /* UDP checksum */
    memcpy(pseudo + 36, tp, 12);
    pseudo[36 + 4] = 0xff; /* FECN, BECN, reserved */
    uint32_t crc = icrc_update(0xffffffffu, pseudo, sizeof(pseudo));
    crc = ~icrc_update(crc, tp + 12, n - 12);
    for (int i = 0; i < 4; i++)
        out[i] = (uint8_t)(crc >> (8 * i));
}

#endif
