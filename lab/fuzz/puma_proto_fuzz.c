// SPDX-License-Identifier: GPL-2.0
/*
 * Fuzz target for the Puma wire protocol checks (guest-kmod/puma/proto.c,
 * compiled here unchanged).  The input is a byte stream as a peer would
 * send it; each message is copied into a buffer of exactly the size the
 * receiver would read, so AddressSanitizer catches any access past what
 * the checks allowed.  Accepted messages are then walked the way the
 * module's dispatch code walks them.  Once the handshake is over, each
 * message is followed by its PUMA_TAG_LEN-byte tag, which is skipped: the
 * harness has no session key, and the module checks the tag before the
 * payload anyway.
 *
 * Build with libFuzzer:  clang -g -O1 -fsanitize=fuzzer,address,undefined
 * With -DPUMA_FUZZ_TRACE, each message's outcome goes to stderr, so a test
 * can tell how far an input got (lab/tests/kmod/test_puma_fuzz.py).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

static uint64_t sink;

#ifdef PUMA_FUZZ_TRACE
#define trace(...)	fprintf(stderr, "puma-fuzz: " __VA_ARGS__)
#else
#define trace(...)	do { } while (0)
#endif

static void walk(const struct puma_hdr *h, const uint8_t *p)
{
	const struct puma_batch *b = (const void *)p;
	uint32_t len = le32_to_cpu(h->len);
	uint32_t i, count, hits;
	const uint8_t *q;

	switch (le16_to_cpu(h->type)) {
	case PUMA_MSG_PUT:
		count = le32_to_cpu(b->count);
		q = p + sizeof(*b);
		for (i = 0; i < count; i++) {
			const struct puma_key *k = (const void *)q;

			sink += le64_to_cpu(k->index);
			sink += q[sizeof(*k) + PUMA_BLOB_BYTES - 1];
			q += sizeof(*k) + PUMA_BLOB_BYTES;
		}
		break;
	case PUMA_MSG_GET:
	case PUMA_MSG_GET_REPLY:
		count = le32_to_cpu(b->count);
		hits = le32_to_cpu(b->hits);
		q = p + sizeof(*b) + (size_t)count * sizeof(struct puma_key);
		for (i = 0; i < count; i++)
			sink += ((const struct puma_key *)(b + 1))[i].ino;
		for (i = 0; i < 32; i++) {
			if (!(hits & (1u << i)))
				continue;
			sink += q[PUMA_BLOB_BYTES - 1];
			q += PUMA_BLOB_BYTES;
		}
		break;
	default:
		if (len)
			sink += p[len - 1];
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct puma_rx_state st = { .seq = 0, .phase = PUMA_PHASE_HELLO };

	if (size < 1)
		return 0;
	st.my_role = (data[0] & 1) ? PUMA_ROLE_LENDER : PUMA_ROLE_BORROWER;
	data++;
	size--;
	while (size >= sizeof(struct puma_hdr)) {
		struct puma_hdr h;
		unsigned int tag;
		uint8_t *p;
		uint32_t len;
		int ret;

		memcpy(&h, data, sizeof(h));
		data += sizeof(h);
		size -= sizeof(h);
		ret = puma_check_hdr(&st, &h);
		trace("hdr type %u: %s\n", le16_to_cpu(h.type),
		      puma_reason_str(ret));
		if (ret)
			return 0;
		len = le32_to_cpu(h.len);
		if (len > PUMA_MSG_MAX_LEN)
			abort();	/* puma_check_hdr must bound it */
		tag = puma_rx_tag_len(&st);
		if ((size_t)len + tag > size) {
			trace("truncated\n");
			return 0;
		}
		p = malloc(len ? len : 1);
		memcpy(p, data, len);
		/* The module verifies the tag here; assume it passed. */
		data += len + tag;
		size -= len + tag;
		ret = puma_check_payload(&st, &h, p);
		trace("payload type %u: %s\n", le16_to_cpu(h.type),
		      puma_reason_str(ret));
		if (!ret) {
			walk(&h, p);
			puma_rx_advance(&st, &h);
			/* The module verifies the MAC here; assume it passed. */
			if (le16_to_cpu(h.type) == PUMA_MSG_AUTH)
				st.phase = PUMA_PHASE_READY;
		}
		free(p);
		if (ret)
			return 0;
		if (puma_reason_str(ret) == NULL)
			abort();
	}
	trace("end, %zu bytes left\n", size);
	return 0;
}
