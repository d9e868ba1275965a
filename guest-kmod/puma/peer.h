/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A peer connection, shared by the files that run it: peer.c (the table
 * of peers, the connection thread, control), tx.c (the send queue and
 * gets), rx.c (receiving and dispatch), listen.c (accepting borrowers)
 * and handshake.c (HELLO, AUTH and the per-direction keys).  Nothing
 * outside those files uses it; the rest of the module goes through
 * puma.h.
 */

#ifndef PUMA_PEER_H
#define PUMA_PEER_H

#include <crypto/hash.h>
#include <linux/in.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/net.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>

#include "proto.h"
#include "puma.h"

struct puma_peer;
struct puma_shm;

/*
 * How a connection's bytes travel: TCP (peer.c, tx.c, rx.c) or the
 * shared memory of an ivshmem device (shm.c).  The framing, handshake,
 * tags and sealing above it are the same code for both.
 */
struct puma_xport_ops {
	const char *name;
	/* Set up a connection: 0 or -errno (then retried after a while). */
	int (*connect)(struct puma_peer *p);
	/* All of @len bytes of @vec, or -errno; @more: more follows soon. */
	int (*send)(struct puma_peer *p, struct kvec *vec, unsigned int nvec,
		    size_t len, bool more);
	/*
	 * Up to @len bytes into @buf: how many, 0 at the end of the
	 * stream, -EAGAIN after a short wait for nothing, -EPROTO for a
	 * peer that broke the transport's rules, else -errno.
	 */
	int (*recv)(struct puma_peer *p, void *buf, size_t len);
	/* Wake and fail senders and receivers; any thread, any time. */
	void (*shutdown)(struct puma_peer *p);
	/* The connection is over: free what connect() set up. */
	void (*release)(struct puma_peer *p);
	/* Optional: a reason it saw that a failed send hides, or 0. */
	int (*error)(struct puma_peer *p);
	/* A lender-side peer that outlives its connections (shm). */
	bool persistent;
};

extern const struct puma_xport_ops puma_tcp_ops;
extern const struct puma_xport_ops puma_shm_ops;

enum puma_peer_state {
	PUMA_PEER_DOWN,
	PUMA_PEER_HANDSHAKE,
	PUMA_PEER_READY,
};

struct puma_txbuf {
	struct list_head node;
	u16 type;
	u16 flags;
	u64 req;
	u32 len;	/* payload bytes */
	bool pooled;	/* from puma_put_pool */
	u64 version;	/* PUT: of the put, to seal it under */
	u8 payload[];
};

/* A PUT item: the key, then the page, sealed in place before sending. */
#define PUMA_PUT_ITEM (sizeof(struct puma_key) + PUMA_BLOB_BYTES)

struct puma_peer {
	struct kref ref;
	int id;
	bool lender_side;	/* we accepted it: we are its lender */
	union puma_addr addr;
	char name[64];		/* "[fe80::...%4294967295]:65535" fits */
	struct task_struct *thread;
	bool dead;		/* lender side: the thread is done */

	const struct puma_xport_ops *xops;
	struct mutex sock_mutex;	/* sock, against puma_shutdown() */
	struct socket *sock;		/* TCP */
	struct puma_shm *shm;		/* shared memory (shm.c) */

	spinlock_t lock;		/* state, suspended, txq, gets */
	int state;
	bool suspended;		/* the lender said SUSPEND */
	struct list_head txq;
	unsigned int txq_len;
	struct list_head gets;
	u64 next_req;

	struct work_struct tx_work;
	struct mutex tx_mutex;		/* one sender at a time; tx_seq */
	u32 tx_seq;

	struct puma_rx_state rx;
	/* The HELLO payloads, borrower's then lender's: what AUTH proves. */
	struct puma_hello hello[2];
	u8 hsbuf[64];		/* handshake messages */
	u8 *rxbuf;		/* PUMA_MSG_MAX_LEN, once authenticated */
	u8 *replybuf;		/* lender side: likewise */
	unsigned long hs_deadline;	/* jiffies: handshake over by then */
	struct crypto_shash *tx_tfm;	/* our direction's key; tx_mutex */
	struct crypto_shash *rx_tfm;	/* the peer's; receiving thread */
	u64 tx_ctr;		/* messages sent and tagged; tx_mutex */
	u64 rx_ctr;		/* messages received and checked */
	u8 key[sizeof(puma_cfg.key)];	/* borrower side, shm: pair's key */
	unsigned int key_len;	/* 0: the default key */
	u64 born;		/* lender side: accept order */
	bool authed;		/* lender side: the peer proved the key */
	bool evicted;		/* lender side: shut, too many pre-auth */
	struct puma_sess *sess;	/* lender side */
	struct puma_seal_ctx *seal;	/* borrower side, under tx_mutex */
	int last_reason;
	unsigned long last_rx;	/* jiffies: the peer's last message */
	unsigned long ping_at;	/* jiffies: our last PING (borrower) */
	u64 ping_req;		/* request id of our last PING */
};

/* peer.c: the table of peers, under puma_peers_lock */
extern spinlock_t puma_peers_lock;
extern struct puma_peer *puma_peers[PUMA_MAX_PEERS + 1];
extern struct mutex puma_peers_mutex;	/* add/del/unload */
struct puma_peer *puma_peer_find(int id);
struct puma_peer *puma_peer_alloc(bool lender_side);
int puma_peer_start(struct puma_peer *p, struct socket *sock);
void puma_peer_stop(struct puma_peer *p);
/* Which peers puma_peer_stop_each() stops. */
enum puma_peer_which {
	PUMA_PEERS_ALL,
	PUMA_PEERS_LENDER_SIDE,		/* we lend to them */
	PUMA_PEERS_BORROWER_SIDE,	/* we borrow from them */
	PUMA_PEERS_ENDED,		/* lender side, connection over */
};
void puma_peer_stop_each(enum puma_peer_which which);
void puma_peer_put(struct puma_peer *p);

/* tx.c */
int puma_tx_init(void);
void puma_tx_exit(void);
void puma_tx_work(struct work_struct *work);
void puma_txbuf_free(struct puma_txbuf *b);
int puma_tag(struct crypto_shash *tfm, u64 ctr, const struct kvec *vec,
	     unsigned int nvec, u8 *tag);
int puma_send(struct puma_peer *p, u16 type, u16 flags, u64 req,
	      struct kvec *vec, unsigned int nvec, size_t len);
int puma_send_small(struct puma_peer *p, u16 type, u64 req, void *payload,
		    size_t len);
void puma_shutdown(struct puma_peer *p);

/* rx.c */
int puma_recv_msg(struct puma_peer *p, struct puma_hdr *h, bool idle);
int puma_dispatch(struct puma_peer *p, const struct puma_hdr *h);

/* heartbeat.c */
void puma_heartbeat_start(struct puma_peer *p);
void puma_heartbeat_rx(struct puma_peer *p);
int puma_heartbeat_idle(struct puma_peer *p);

/* shm.c */
int puma_shm_init(void);
void puma_shm_exit(void);

/* handshake.c */
int puma_handshake(struct puma_peer *p);
int puma_digest(struct crypto_shash *tfm, const void *prefix,
		size_t prefix_len, const struct kvec *parts, unsigned int n,
		u8 *out);

#endif /* PUMA_PEER_H */
