/* SPDX-License-Identifier: GPL-2.0 */
/*
 * User-space stand-ins for the kernel types proto.h uses, so that proto.c
 * builds unchanged in the fuzz harness (lab/fuzz/) and user tools.
 */
#ifndef PUMA_PROTO_USER_H
#define PUMA_PROTO_USER_H

#include <endian.h>
#include <stddef.h>
#include <stdint.h>

typedef uint8_t __u8;
typedef uint16_t __u16;
typedef uint32_t __u32;
typedef uint64_t __u64;
typedef uint16_t __le16;
typedef uint32_t __le32;
typedef uint64_t __le64;

#define le16_to_cpu(x) le16toh(x)
#define le32_to_cpu(x) le32toh(x)
#define le64_to_cpu(x) le64toh(x)
#define cpu_to_le16(x) htole16(x)
#define cpu_to_le32(x) htole32(x)
#define cpu_to_le64(x) htole64(x)

#endif /* PUMA_PROTO_USER_H */
