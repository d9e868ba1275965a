// SPDX-License-Identifier: GPL-2.0
/*
 * Puma wire protocol checks, shared by the kernel module and the user-space
 * fuzz harness (lab/fuzz/puma_proto_fuzz.c builds this very file).
 *
 * A receiver calls puma_check_hdr() on each 24-byte header before reading
 * the payload, so a hostile length never makes it read or allocate more
 * than PUMA_MSG_MAX_LEN; then puma_check_payload() on the whole payload,
 * which checks every count against the length actually received; only then
 * is the message used, and puma_rx_advance() moves the expected sequence
 * number and the phase.  Any other outcome is a reason code and the caller
 * closes the connection.  Nothing here allocates, sleeps or keeps state
 * besides struct puma_rx_state.
 */

#include "proto.h"

static const char *const puma_reasons[PUMA_REASON_MAX] = {
	[PUMA_OK] = "ok",
	[PUMA_ERR_MAGIC] = "bad magic",
	[PUMA_ERR_TYPE] = "unknown message type",
	[PUMA_ERR_LENGTH] = "bad length",
	[PUMA_ERR_SEQ] = "out-of-order or replayed sequence number",
	[PUMA_ERR_PHASE] = "message not allowed in this phase",
	[PUMA_ERR_ROLE] = "message not allowed for this role",
	[PUMA_ERR_VERSION] = "no common protocol version",
	[PUMA_ERR_COUNT] = "bad batch count",
	[PUMA_ERR_RESERVED] = "reserved field not zero",
	[PUMA_ERR_AUTH] = "authentication failed",
	[PUMA_ERR_REQ] = "unknown request id",
	[PUMA_ERR_TIMEOUT] = "timeout",
	[PUMA_ERR_IO] = "connection error",
	[PUMA_ERR_NOKEY] = "no shared key configured",
	[PUMA_ERR_TAG] = "bad message tag",
	[PUMA_ERR_HS_TIMEOUT] = "handshake not finished in time",
	[PUMA_ERR_EVICTED] = "too many unauthenticated connections",
	[PUMA_ERR_SHM] = "bad shared memory ring index",
	[PUMA_ERR_SILENT] = "peer silent",
};

const char *puma_reason_str(int reason)
{
	if (reason < 0 || reason >= PUMA_REASON_MAX)
		return "unknown reason";
	return puma_reasons[reason];
}

unsigned int puma_hweight32(__u32 v)
{
	unsigned int n = 0;

	while (v) {
		v &= v - 1;
		n++;
	}
	return n;
}

/* Which side may send each type; 0: both. */
static int puma_sender_role(unsigned int type)
{
	switch (type) {
	case PUMA_MSG_PUT:
	case PUMA_MSG_GET:
	case PUMA_MSG_INVAL:
		return PUMA_ROLE_BORROWER;
	case PUMA_MSG_GET_REPLY:
	case PUMA_MSG_SUSPEND:
	case PUMA_MSG_RESUME:
		return PUMA_ROLE_LENDER;
	default:
		return 0;
	}
}

static __u32 puma_min_len(unsigned int type)
{
	switch (type) {
	case PUMA_MSG_HELLO:
		return sizeof(struct puma_hello);
	case PUMA_MSG_AUTH:
		return sizeof(struct puma_auth);
	case PUMA_MSG_PUT:
	case PUMA_MSG_GET:
	case PUMA_MSG_GET_REPLY:
		return sizeof(struct puma_batch) + sizeof(struct puma_key);
	case PUMA_MSG_INVAL:
		return sizeof(struct puma_inval);
	default:
		return 0;
	}
}

static __u32 puma_max_len(unsigned int type)
{
	switch (type) {
	case PUMA_MSG_PUT:
	case PUMA_MSG_GET_REPLY:
		return PUMA_MSG_MAX_LEN;
	case PUMA_MSG_GET:
		return sizeof(struct puma_batch) +
		       PUMA_BATCH_MAX * sizeof(struct puma_key);
	default:
		return puma_min_len(type);
	}
}

/**
 * puma_check_hdr - check a received header before reading its payload
 * @st: the receiver's state
 * @h: the header as received
 *
 * Return: PUMA_OK, or the enum puma_reason to close the connection with.
 */
int puma_check_hdr(const struct puma_rx_state *st, const struct puma_hdr *h)
{
	unsigned int type = le16_to_cpu(h->type);
	__u32 len = le32_to_cpu(h->len);
	int sender;

	if (le32_to_cpu(h->magic) != PUMA_PROTO_MAGIC)
		return PUMA_ERR_MAGIC;
	if (type == 0 || type > PUMA_MSG_TYPE_MAX)
		return PUMA_ERR_TYPE;
	if (len < puma_min_len(type) || len > puma_max_len(type))
		return PUMA_ERR_LENGTH;
	if (le32_to_cpu(h->seq) != st->seq)
		return PUMA_ERR_SEQ;
	switch (st->phase) {
	case PUMA_PHASE_HELLO:
		if (type != PUMA_MSG_HELLO)
			return PUMA_ERR_PHASE;
		break;
	case PUMA_PHASE_AUTH:
		if (type != PUMA_MSG_AUTH)
			return PUMA_ERR_PHASE;
		break;
	default:
		if (type == PUMA_MSG_HELLO || type == PUMA_MSG_AUTH)
			return PUMA_ERR_PHASE;
	}
	sender = puma_sender_role(type);
	if (sender && sender == st->my_role)
		return PUMA_ERR_ROLE;
	if (h->flags && !(type == PUMA_MSG_GET &&
			  le16_to_cpu(h->flags) == PUMA_GET_EXCLUSIVE))
		return PUMA_ERR_RESERVED;
	return PUMA_OK;
}

static int puma_check_key(const struct puma_key *k)
{
	return k->reserved ? PUMA_ERR_RESERVED : PUMA_OK;
}

static int puma_check_batch(const struct puma_hdr *h, const void *p)
{
	const struct puma_batch *b = p;
	const struct puma_key *keys = (const void *)(b + 1);
	unsigned int type = le16_to_cpu(h->type);
	__u32 len = le32_to_cpu(h->len);
	__u32 count = le32_to_cpu(b->count);
	__u32 hits = le32_to_cpu(b->hits);
	__u64 want;
	__u32 i;
	int ret;

	if (count == 0 || count > PUMA_BATCH_MAX)
		return PUMA_ERR_COUNT;
	switch (type) {
	case PUMA_MSG_PUT:
		if (hits)
			return PUMA_ERR_RESERVED;
		want = sizeof(*b) + (__u64)count *
			(sizeof(struct puma_key) + PUMA_BLOB_BYTES);
		break;
	case PUMA_MSG_GET:
		if (hits)
			return PUMA_ERR_RESERVED;
		want = sizeof(*b) + (__u64)count * sizeof(struct puma_key);
		break;
	default:	/* GET_REPLY */
		if (count < 32 && (hits >> count))
			return PUMA_ERR_COUNT;
		want = sizeof(*b) + (__u64)count * sizeof(struct puma_key) +
		       (__u64)puma_hweight32(hits) * PUMA_BLOB_BYTES;
	}
	if (want != len)
		return PUMA_ERR_LENGTH;
	for (i = 0; i < count; i++) {
		const struct puma_key *k;

		if (type == PUMA_MSG_PUT)
			k = (const void *)((const __u8 *)keys + (size_t)i *
				(sizeof(*k) + PUMA_BLOB_BYTES));
		else
			k = &keys[i];
		ret = puma_check_key(k);
		if (ret)
			return ret;
	}
	return PUMA_OK;
}

/**
 * puma_check_payload - check a payload whose header passed puma_check_hdr()
 * @st: the receiver's state
 * @h: the header
 * @p: le32_to_cpu(h->len) payload bytes
 *
 * Return: PUMA_OK, or the enum puma_reason to close the connection with.
 */
int puma_check_payload(const struct puma_rx_state *st,
		       const struct puma_hdr *h, const void *p)
{
	const struct puma_hello *hello = p;
	const struct puma_inval *inv = p;
	unsigned int type = le16_to_cpu(h->type);
	unsigned int role;

	switch (type) {
	case PUMA_MSG_HELLO:
		if (le32_to_cpu(hello->magic) != PUMA_PROTO_MAGIC)
			return PUMA_ERR_MAGIC;
		if (hello->reserved)
			return PUMA_ERR_RESERVED;
		if (le16_to_cpu(hello->version_min) > PUMA_PROTO_VERSION ||
		    le16_to_cpu(hello->version_max) < PUMA_PROTO_VERSION)
			return PUMA_ERR_VERSION;
		role = le16_to_cpu(hello->role);
		if (role != PUMA_ROLE_BORROWER && role != PUMA_ROLE_LENDER)
			return PUMA_ERR_ROLE;
		if (role == st->my_role)
			return PUMA_ERR_ROLE;
		return PUMA_OK;
	case PUMA_MSG_PUT:
	case PUMA_MSG_GET:
	case PUMA_MSG_GET_REPLY:
		return puma_check_batch(h, p);
	case PUMA_MSG_INVAL:
		if (le32_to_cpu(inv->kind) > PUMA_INVAL_POOL)
			return PUMA_ERR_RESERVED;
		if (le32_to_cpu(inv->kind) == PUMA_INVAL_RANGE &&
		    le64_to_cpu(inv->start) > le64_to_cpu(inv->end))
			return PUMA_ERR_LENGTH;
		return PUMA_OK;
	default:
		return PUMA_OK;
	}
}

/**
 * puma_rx_advance - account a message that passed both checks
 * @st: the receiver's state
 * @h: the message's header
 *
 * The AUTH message only moves to PUMA_PHASE_READY through the caller, once
 * the proof it carries was verified; here it just advances the sequence.
 */
void puma_rx_advance(struct puma_rx_state *st, const struct puma_hdr *h)
{
	st->seq++;
	if (le16_to_cpu(h->type) == PUMA_MSG_HELLO)
		st->phase = PUMA_PHASE_AUTH;
}
