// SPDX-License-Identifier: GPL-2.0
/*
 * What a peer connection receives: whole messages checked against their
 * tag (proto.c checks every header and payload), then dispatched: a
 * lender stores puts, applies invalidations and answers gets from its
 * store; a borrower fills the pages of the gets it waits for.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <crypto/algapi.h>
#include <crypto/hash.h>
#include <crypto/sha2.h>
#include <linux/highmem.h>
#include <linux/in.h>
#include <linux/delay.h>
#include <linux/inet.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <net/sock.h>
#include <net/tcp.h>

#include "compat.h"
#include "peer.h"
#include "puma.h"

#define PUMA_MSG_TIMEOUT	(10 * HZ)	/* a started message */

/*
 * Receive exactly @len bytes; @idle: waiting for a message may last.
 * Once the first byte is in, the rest must come within PUMA_MSG_TIMEOUT,
 * however slowly it trickles; in the handshake, all must come before
 * p->hs_deadline.
 */
static int puma_recv(struct puma_peer *p, void *buf, size_t len, bool idle)
{
	bool hs = p->rx.phase != PUMA_PHASE_READY;
	unsigned long deadline = hs ? p->hs_deadline :
				      jiffies + PUMA_MSG_TIMEOUT;
	size_t got = 0;

	while (got < len) {
		int ret;

		if (hs || !idle || got) {
			if (time_after(jiffies, deadline))
				return hs ? PUMA_ERR_HS_TIMEOUT :
					    PUMA_ERR_TIMEOUT;
		} else {
			int reason = puma_heartbeat_idle(p);

			if (reason)
				return reason;
			deadline = jiffies + PUMA_MSG_TIMEOUT;
		}
		ret = p->xops->recv(p, buf + got, len - got);
		if (ret > 0) {
			got += ret;
			puma_count_n(PUMA_STAT_BYTES_RX, ret);
			continue;
		}
		if (ret == 0)
			return PUMA_ERR_IO;
		if (ret == -EPROTO)
			return PUMA_ERR_SHM;
		if (ret != -EAGAIN && ret != -EINTR)
			return PUMA_ERR_IO;
		if (kthread_should_stop())
			return PUMA_ERR_IO;
	}
	return PUMA_OK;
}

/*
 * Receive and check one message into p->rxbuf (p->hsbuf in the
 * handshake).  Once the handshake is over the tag is checked before
 * anything else in the payload.
 */
int puma_recv_msg(struct puma_peer *p, struct puma_hdr *h, bool idle)
{
	bool tagged = puma_rx_tag_len(&p->rx);
	u8 *buf = tagged ? p->rxbuf : p->hsbuf;
	u8 tag[PUMA_TAG_LEN], want[PUMA_TAG_LEN];
	u32 len;
	int ret;

	BUILD_BUG_ON(sizeof(struct puma_hello) > sizeof(p->hsbuf) ||
		     sizeof(struct puma_auth) > sizeof(p->hsbuf));
	ret = puma_recv(p, h, sizeof(*h), idle);
	if (ret)
		return ret;
	ret = puma_check_hdr(&p->rx, h);
	if (ret)
		return ret;
	/* Bounded by puma_check_hdr(): 44 bytes at most in the handshake. */
	len = le32_to_cpu(h->len);
	ret = puma_recv(p, buf, len, false);
	if (ret)
		return ret;
	if (tagged) {
		struct kvec vec[2] = {
			{ .iov_base = h, .iov_len = sizeof(*h) },
			{ .iov_base = buf, .iov_len = len },
		};

		ret = puma_recv(p, tag, sizeof(tag), false);
		if (ret)
			return ret;
		if (puma_tag(p->rx_tfm, p->rx_ctr++, vec, len ? 2 : 1, want))
			return PUMA_ERR_IO;
		if (crypto_memneq(tag, want, sizeof(tag)))
			return PUMA_ERR_TAG;
	}
	ret = puma_check_payload(&p->rx, h, buf);
	if (ret)
		return ret;
	puma_rx_advance(&p->rx, h);
	/* Only a message that proved the pair's key is a sign of life. */
	if (tagged)
		puma_heartbeat_rx(p);
	return PUMA_OK;
}

/* Lender: answer a GET from the store. */
static int puma_lend_get(struct puma_peer *p, const struct puma_hdr *h)
{
	const struct puma_batch *in = (void *)p->rxbuf;
	const struct puma_key *keys = (const void *)(in + 1);
	u32 count = le32_to_cpu(in->count), hits = 0, i;
	bool excl = le16_to_cpu(h->flags) & PUMA_GET_EXCLUSIVE;
	struct puma_batch *out = (void *)p->replybuf;
	u8 *data = p->replybuf + sizeof(*out) + count * sizeof(*keys);
	struct kvec vec[2];
	size_t len;
	int ret;

	memcpy(out + 1, keys, count * sizeof(*keys));
	for (i = 0; i < count; i++) {
		puma_count(PUMA_STAT_LEND_GETS);
		if (puma_store_get(p->sess, &keys[i], data, excl)) {
			hits |= BIT(i);
			data += PUMA_BLOB_BYTES;
			puma_count(PUMA_STAT_LEND_HITS);
		}
	}
	out->count = cpu_to_le32(count);
	out->hits = cpu_to_le32(hits);
	len = data - p->replybuf;
	vec[1].iov_base = p->replybuf;
	vec[1].iov_len = len;
	mutex_lock(&p->tx_mutex);
	ret = puma_send(p, PUMA_MSG_GET_REPLY, 0, le64_to_cpu(h->req), vec, 2,
			len);
	mutex_unlock(&p->tx_mutex);
	return ret ? PUMA_ERR_IO : PUMA_OK;
}

static bool puma_key_match(const struct puma_key *k,
			   const struct puma_get_req *req, unsigned int i)
{
	return le64_to_cpu(k->pool) == req->fkey.pool &&
	       le64_to_cpu(k->ino) == req->fkey.ino &&
	       le32_to_cpu(k->gen) == req->fkey.gen &&
	       le64_to_cpu(k->index) == req->index[i];
}

/*
 * Borrower: fill the pages of the request this reply answers with the
 * ciphertext, the tags go to the request; the reader opens them.
 */
static int puma_borrow_reply(struct puma_peer *p, const struct puma_hdr *h)
{
	const struct puma_batch *in = (void *)p->rxbuf;
	const struct puma_key *keys = (const void *)(in + 1);
	u32 count = le32_to_cpu(in->count), hits = le32_to_cpu(in->hits);
	const u8 *data = (const u8 *)(keys + count);
	struct puma_get_req *req = NULL, *r;
	u64 id = le64_to_cpu(h->req);
	unsigned long flags;
	unsigned int i;

	spin_lock_irqsave(&p->lock, flags);
	list_for_each_entry(r, &p->gets, node) {
		if (r->id == id) {
			req = r;
			list_del_init(&r->node);
			break;
		}
	}
	spin_unlock_irqrestore(&p->lock, flags);
	if (!req)
		return PUMA_OK;	/* answer after the timeout: dropped */
	if (count != req->count) {
		req->error = -EPROTO;
		complete(&req->done);
		return PUMA_ERR_REQ;
	}
	for (i = 0; i < count; i++) {
		if (!puma_key_match(&keys[i], req, i)) {
			req->hits = 0;
			req->error = -EPROTO;
			complete(&req->done);
			return PUMA_ERR_REQ;
		}
		if (hits & BIT(i)) {
			memcpy_to_page(req->page[i], 0, (const char *)data,
				       PUMA_PAGE_BYTES);
			memcpy(req->tag[i], data + PUMA_PAGE_BYTES,
			       PUMA_SEAL_TAG_LEN);
			data += PUMA_BLOB_BYTES;
			req->hits |= BIT(i);
		}
	}
	complete(&req->done);
	return PUMA_OK;
}

int puma_dispatch(struct puma_peer *p, const struct puma_hdr *h)
{
	const struct puma_batch *batch = (void *)p->rxbuf;
	const u8 *item = (const u8 *)(batch + 1);
	u32 i;

	switch (le16_to_cpu(h->type)) {
	case PUMA_MSG_PUT:
		for (i = 0; i < le32_to_cpu(batch->count); i++) {
			const struct puma_key *k = (const void *)item;

			if (!puma_store_put(p->sess, k, k + 1))
				puma_count(PUMA_STAT_LEND_PUTS);
			item += PUMA_PUT_ITEM;
		}
		return PUMA_OK;
	case PUMA_MSG_GET:
		return puma_lend_get(p, h);
	case PUMA_MSG_INVAL:
		puma_store_inval(p->sess, (const void *)p->rxbuf);
		return PUMA_OK;
	case PUMA_MSG_GET_REPLY:
		return puma_borrow_reply(p, h);
	case PUMA_MSG_SUSPEND:
		WRITE_ONCE(p->suspended, true);
		puma_index_drop_peer(p->id);
		return PUMA_OK;
	case PUMA_MSG_RESUME:
		WRITE_ONCE(p->suspended, false);
		return PUMA_OK;
	case PUMA_MSG_PING:
		return puma_send_small(p, PUMA_MSG_PONG, le64_to_cpu(h->req),
				       NULL, 0) ? PUMA_ERR_IO : PUMA_OK;
	default:	/* PONG */
		return PUMA_OK;
	}
}
