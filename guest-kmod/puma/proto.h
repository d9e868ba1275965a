/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Puma wire protocol, version 2 (see docs/puma-protocol.md).
 *
 * One TCP connection per (borrower, lender) pair carries every message of
 * that pair, in order.  Each message is a fixed 24-byte header followed by
 * hdr.len payload bytes and, once the handshake is over (PUMA_PHASE_READY),
 * by a PUMA_TAG_LEN-byte tag that hdr.len does not count.  All integers are
 * little endian.  The header is checked before any payload byte is read
 * (magic, known type, a length bounded per type, sequence number equal to
 * the expected one, a type allowed in the current phase); the tag is
 * verified next, then the payload is checked against the counts it carries
 * before anything in it is used.
 *
 * This header and proto.c build both in the kernel and in user space (the
 * fuzz harness, lab/fuzz/), so they only use fixed-size types.
 */
#ifndef PUMA_PROTO_H
#define PUMA_PROTO_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <asm/byteorder.h>
#else
#include "proto_user.h"
#endif

#define PUMA_PROTO_MAGIC	0x414d5550	/* "PUMA" on the wire */
#define PUMA_PROTO_VERSION	2
#define PUMA_PAGE_BYTES		4096
#define PUMA_BATCH_MAX		32
#define PUMA_NONCE_LEN		16
#define PUMA_MAC_LEN		32
#define PUMA_TAG_LEN		16	/* follows each message once READY */
#define PUMA_NAME_LEN		16

/*
 * Page payload of PUT and GET_REPLY: an opaque blob the lender stores and
 * returns as it is.  The borrower seals each page before it leaves
 * (seal.c): the 4096 bytes of ciphertext, then the AES-GCM tag (not to
 * be confused with the message tag, PUMA_TAG_LEN).  Nothing else in the
 * protocol depends on what is in it.
 */
#define PUMA_SEAL_TAG_LEN	16
#define PUMA_BLOB_BYTES		(PUMA_PAGE_BYTES + PUMA_SEAL_TAG_LEN)

enum puma_msg_type {
	PUMA_MSG_HELLO = 1,	/* both sides, first message */
	PUMA_MSG_AUTH = 2,	/* borrower's, then lender's if it checks */
	PUMA_MSG_PUT = 3,	/* borrower -> lender: pages to host */
	PUMA_MSG_GET = 4,	/* borrower -> lender: pages wanted */
	PUMA_MSG_GET_REPLY = 5,	/* lender -> borrower */
	PUMA_MSG_INVAL = 6,	/* borrower -> lender: drop copies */
	PUMA_MSG_SUSPEND = 7,	/* lender -> borrower: stop putting */
	PUMA_MSG_RESUME = 8,	/* lender -> borrower: puts welcome again */
	PUMA_MSG_PING = 9,	/* either side */
	PUMA_MSG_PONG = 10,	/* answer to PING, same req */
	PUMA_MSG_TYPE_MAX = PUMA_MSG_PONG,
};

/* hdr.flags of a GET: the lender drops what it returns (exclusive mode). */
#define PUMA_GET_EXCLUSIVE	0x1

struct puma_hdr {
	__le32 magic;
	__le16 type;
	__le16 flags;
	__le32 len;	/* payload bytes after this header */
	__le32 seq;	/* 0 for HELLO, then +1 per message, per direction */
	__le64 req;	/* request id: GET and its GET_REPLY, PING and PONG */
};

enum puma_role {
	PUMA_ROLE_BORROWER = 1,
	PUMA_ROLE_LENDER = 2,
};

struct puma_hello {
	__le32 magic;		/* PUMA_PROTO_MAGIC again */
	__le16 version_min;
	__le16 version_max;
	__le16 role;		/* enum puma_role of the sender */
	__le16 reserved;	/* 0 */
	__u8 nonce[PUMA_NONCE_LEN];
	__u8 name[PUMA_NAME_LEN];	/* sender's hostname, informative */
};

/*
 * AUTH payload: HMAC-SHA256(key, label || borrower's HELLO payload ||
 * lender's HELLO payload) where label is "puma2-borrower" or
 * "puma2-lender" (the sender's role), so a proof can be neither reflected
 * nor replayed on another connection, and covers both HELLOs whole.  The
 * borrower proves first; the lender sends its proof only after it checked
 * the borrower's, so a client without the key gets nothing keyed back.
 */
struct puma_auth {
	__u8 mac[PUMA_MAC_LEN];
};

/* Identity of one page of one file; see docs/puma-never-stale.md. */
struct puma_key {
	__le64 pool;	/* random per-mount epoch, never reused */
	__le64 ino;
	__le32 gen;	/* inode generation */
	__le32 reserved;	/* 0 */
	__le64 index;	/* page index in the file */
};

/*
 * PUT: batch, then count x (key, PUMA_BLOB_BYTES blob).
 * GET: batch, then count x key.
 * GET_REPLY: batch (hits = bitmap of found keys), count x key echoed in
 * the GET's order, then popcount(hits) x PUMA_BLOB_BYTES in that order.
 */
struct puma_batch {
	__le32 count;	/* 1 .. PUMA_BATCH_MAX */
	__le32 hits;	/* GET_REPLY only, else 0 */
};

enum puma_inval_kind {
	PUMA_INVAL_RANGE = 0,	/* pages start..end (inclusive) of a file */
	PUMA_INVAL_FILE = 1,	/* every page of a file */
	PUMA_INVAL_POOL = 2,	/* every page of a pool (a mount) */
};

struct puma_inval {
	__le64 pool;
	__le64 ino;
	__le32 gen;
	__le32 kind;
	__le64 start;
	__le64 end;
};

/* Connection phases, as seen by the receiver. */
enum puma_phase {
	PUMA_PHASE_HELLO = 0,	/* expects HELLO */
	PUMA_PHASE_AUTH = 1,	/* expects AUTH */
	PUMA_PHASE_READY = 2,	/* data messages */
};

/* Why a message was refused; the connection is then closed. */
enum puma_reason {
	PUMA_OK = 0,
	PUMA_ERR_MAGIC,
	PUMA_ERR_TYPE,
	PUMA_ERR_LENGTH,
	PUMA_ERR_SEQ,
	PUMA_ERR_PHASE,
	PUMA_ERR_ROLE,
	PUMA_ERR_VERSION,
	PUMA_ERR_COUNT,
	PUMA_ERR_RESERVED,
	PUMA_ERR_AUTH,
	PUMA_ERR_REQ,
	PUMA_ERR_TIMEOUT,
	PUMA_ERR_IO,
	PUMA_ERR_NOKEY,
	PUMA_ERR_TAG,		/* message tag wrong: tampered or forged */
	PUMA_ERR_HS_TIMEOUT,	/* handshake over too late */
	PUMA_ERR_EVICTED,	/* too many connections still in handshake */
	PUMA_ERR_SHM,		/* shared memory ring index out of range */
	PUMA_ERR_SILENT,	/* nothing from the peer for peer_timeout_ms */
	PUMA_REASON_MAX,
};

#define PUMA_MSG_MAX_LEN	(sizeof(struct puma_batch) + \
				 PUMA_BATCH_MAX * (sizeof(struct puma_key) + \
						   PUMA_BLOB_BYTES))

struct puma_rx_state {
	__u32 seq;		/* next expected sequence number */
	__u8 phase;		/* enum puma_phase */
	__u8 my_role;		/* enum puma_role of the receiver */
};

/* Bytes of tag after the payload of the next message @st receives. */
static inline unsigned int puma_rx_tag_len(const struct puma_rx_state *st)
{
	return st->phase == PUMA_PHASE_READY ? PUMA_TAG_LEN : 0;
}

const char *puma_reason_str(int reason);
int puma_check_hdr(const struct puma_rx_state *st, const struct puma_hdr *h);
int puma_check_payload(const struct puma_rx_state *st,
		       const struct puma_hdr *h, const void *p);
void puma_rx_advance(struct puma_rx_state *st, const struct puma_hdr *h);
unsigned int puma_hweight32(__u32 v);

#endif /* PUMA_PROTO_H */
