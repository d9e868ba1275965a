// SPDX-License-Identifier: GPL-2.0
/*
 * What a peer connection sends, in the order the never-stale rule needs:
 * one queue per connection (txq) of puts, invalidations and gets, drained
 * by a work item; puts batched and sealed just before they leave; a get
 * sent by the reading task itself when nothing is ahead of it, then its
 * wait for the answer.  The design is described in peer.c.
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

#define PUMA_TXQ_EXTRA		1024	/* queued besides puts */

static unsigned int put_buffers = 1024;
module_param(put_buffers, uint, 0444);
MODULE_PARM_DESC(put_buffers,
		 "Pages of preallocated buffers for puts in flight (1024)");

/*
 * Fault injection for the lab: the next INVAL the send worker takes is
 * not sent; after this long it fails as a send error would, and the
 * worker waits as long again before shutting the connection down.
 */
static unsigned int fault_inval_error_ms;
module_param(fault_inval_error_ms, uint, 0644);
MODULE_PARM_DESC(fault_inval_error_ms,
		 "Test only: fail the next INVAL send after this long, shut down as long after (0)");

static DEFINE_SPINLOCK(puma_pool_lock);
static struct puma_txbuf **puma_pool;
static unsigned int puma_pool_free;
static struct workqueue_struct *puma_wq;

static struct puma_txbuf *puma_pool_get(void)
{
	struct puma_txbuf *b = NULL;
	unsigned long flags;

	spin_lock_irqsave(&puma_pool_lock, flags);
	if (puma_pool_free)
		b = puma_pool[--puma_pool_free];
	spin_unlock_irqrestore(&puma_pool_lock, flags);
	return b;
}

void puma_txbuf_free(struct puma_txbuf *b)
{
	unsigned long flags;

	if (!b->pooled) {
		kfree(b);
		return;
	}
	spin_lock_irqsave(&puma_pool_lock, flags);
	puma_pool[puma_pool_free++] = b;
	spin_unlock_irqrestore(&puma_pool_lock, flags);
}

unsigned int puma_put_buffers_free(void)
{
	return READ_ONCE(puma_pool_free);
}

/* Does the queued PUT @put carry a key that the GET @get asks for? */
static bool puma_put_for_get(const struct puma_txbuf *put,
			     const struct puma_txbuf *get)
{
	const struct puma_key *pk = (const struct puma_key *)put->payload;
	const struct puma_batch *batch = (const void *)get->payload;
	const struct puma_key *gk = (const struct puma_key *)(batch + 1);
	u32 i, n = le32_to_cpu(batch->count);

	if (pk->pool != gk->pool || pk->ino != gk->ino || pk->gen != gk->gen)
		return false;
	for (i = 0; i < n; i++)
		if (pk->index == gk[i].index)
			return true;
	return false;
}

/*
 * Where a message goes in @p's queue.  A GET overtakes the PUTs of other
 * keys at the tail of the queue (a reading task waits for it, a put waits
 * for no one) and nothing else, so the messages of any one key still
 * reach the lender in the order they were decided; the never-stale
 * argument (docs/puma-never-stale.md) is per key.
 */
static struct list_head *puma_txq_slot(struct puma_peer *p,
				       struct puma_txbuf *b)
{
	struct puma_txbuf *pos;

	lockdep_assert_held(&p->lock);
	if (b->type != PUMA_MSG_GET)
		return &p->txq;
	list_for_each_entry_reverse(pos, &p->txq, node)
		if (pos->type != PUMA_MSG_PUT || puma_put_for_get(pos, b))
			return pos->node.next;
	return p->txq.next;
}

/* Queue @b on @p if it is connected; caller holds puma_peers_lock. */
static int puma_peer_enqueue(struct puma_peer *p, struct puma_txbuf *b)
{
	unsigned long flags;
	int ret = 0;

	lockdep_assert_held(&puma_peers_lock);
	spin_lock_irqsave(&p->lock, flags);
	if (p->state != PUMA_PEER_READY) {
		ret = -ENOTCONN;
	} else if (p->txq_len >= put_buffers + PUMA_TXQ_EXTRA) {
		ret = -ENOSPC;
	} else {
		/* list_add_tail(new, next): insert before next. */
		list_add_tail(&b->node, puma_txq_slot(p, b));
		p->txq_len++;
		queue_work(puma_wq, &p->tx_work);
	}
	spin_unlock_irqrestore(&p->lock, flags);
	return ret;
}

static void puma_key_fill(struct puma_key *k, const struct puma_fkey *fk,
			  pgoff_t index)
{
	k->pool = cpu_to_le64(fk->pool);
	k->ino = cpu_to_le64(fk->ino);
	k->gen = cpu_to_le32(fk->gen);
	k->reserved = 0;
	k->index = cpu_to_le64(index);
}

/**
 * puma_peer_queue_put - queue a page for lender @id
 * @id: the lender
 * @fk: the file
 * @index: the page index
 * @version: the put's version (puma_seal_version()), recorded in the index
 * @data: PAGE_SIZE bytes, copied before return; sealed when sent
 *
 * Caller: the put hook, under puma_index_lock.
 *
 * Return: 0 if queued, else the put is dropped (and counted).
 */
int puma_peer_queue_put(int id, const struct puma_fkey *fk, pgoff_t index,
			u64 version, const void *data)
{
	struct puma_txbuf *b;
	struct puma_peer *p;
	unsigned long flags;
	int ret;

	puma_index_assert_locked();
	spin_lock_irqsave(&puma_peers_lock, flags);
	p = puma_peer_find(id);
	if (!p) {
		puma_count(PUMA_STAT_DROP_NO_PEER);
		ret = -ENOTCONN;
		goto out_unlock;
	}
	b = puma_pool_get();
	if (!b) {
		puma_count(PUMA_STAT_DROP_NO_BUFFER);
		ret = -ENOBUFS;
		goto out_unlock;
	}
	b->type = PUMA_MSG_PUT;
	b->flags = 0;
	b->req = 0;
	b->len = PUMA_PUT_ITEM;
	b->version = version;
	puma_key_fill((struct puma_key *)b->payload, fk, index);
	memcpy(b->payload + sizeof(struct puma_key), data, PUMA_PAGE_BYTES);
	ret = puma_peer_enqueue(p, b);
	if (ret) {
		puma_count(ret == -ENOSPC ? PUMA_STAT_DROP_QUEUE_FULL :
			   PUMA_STAT_DROP_NO_PEER);
		puma_txbuf_free(b);
	}
out_unlock:
	spin_unlock_irqrestore(&puma_peers_lock, flags);
	return ret;
}

/**
 * puma_peer_queue_inval - tell lender @id to drop copies
 * @id: the lender
 * @fk: the file (only fk->pool for PUMA_INVAL_POOL)
 * @kind: enum puma_inval_kind
 * @start: first page (PUMA_INVAL_RANGE)
 * @end: last page, inclusive (PUMA_INVAL_RANGE)
 *
 * Caller holds puma_index_lock.  Losing this message is safe: the index no
 * longer lists the pages, and the next put of a page replaces its copy.
 */
void puma_peer_queue_inval(int id, const struct puma_fkey *fk, u32 kind,
			   pgoff_t start, pgoff_t end)
{
	struct puma_inval *inv;
	struct puma_txbuf *b;
	struct puma_peer *p;
	unsigned long flags;

	puma_index_assert_locked();
	spin_lock_irqsave(&puma_peers_lock, flags);
	p = puma_peer_find(id);
	if (!p)
		goto out_unlock;
	b = kmalloc(sizeof(*b) + sizeof(*inv), GFP_NOWAIT | __GFP_NOWARN);
	if (!b)
		goto out_unlock;
	b->type = PUMA_MSG_INVAL;
	b->flags = 0;
	b->req = 0;
	b->len = sizeof(*inv);
	b->pooled = false;
	inv = (struct puma_inval *)b->payload;
	inv->pool = cpu_to_le64(fk->pool);
	inv->ino = cpu_to_le64(fk->ino);
	inv->gen = cpu_to_le32(fk->gen);
	inv->kind = cpu_to_le32(kind);
	inv->start = cpu_to_le64(start);
	inv->end = cpu_to_le64(end);
	if (puma_peer_enqueue(p, b))
		kfree(b);
out_unlock:
	spin_unlock_irqrestore(&puma_peers_lock, flags);
}

/*
 * The tag of a message: HMAC-SHA256, with the key of its direction, of its
 * 64-bit sequence number @ctr (the header carries the low 32 bits) then
 * the @nvec pieces of header and payload, cut to PUMA_TAG_LEN bytes.
 */
int puma_tag(struct crypto_shash *tfm, u64 ctr, const struct kvec *vec,
		    unsigned int nvec, u8 *tag)
{
	__le64 seq = cpu_to_le64(ctr);
	u8 mac[SHA256_DIGEST_SIZE];
	int ret;

	ret = puma_digest(tfm, &seq, sizeof(seq), vec, nvec, mac);
	memcpy(tag, mac, PUMA_TAG_LEN);
	memzero_explicit(mac, sizeof(mac));
	return ret;
}

/*
 * Send one message, and its tag once the handshake is over (p->tx_tfm);
 * caller holds p->tx_mutex.
 */
int puma_send(struct puma_peer *p, u16 type, u16 flags, u64 req,
		     struct kvec *vec, unsigned int nvec, size_t len)
{
	u8 tag[PUMA_TAG_LEN];
	struct puma_hdr hdr;
	struct kvec tvec;
	int ret;

	lockdep_assert_held(&p->tx_mutex);
	hdr.magic = cpu_to_le32(PUMA_PROTO_MAGIC);
	hdr.type = cpu_to_le16(type);
	hdr.flags = cpu_to_le16(flags);
	hdr.len = cpu_to_le32(len);
	hdr.seq = cpu_to_le32(p->tx_seq++);
	hdr.req = cpu_to_le64(req);
	vec[0].iov_base = &hdr;
	vec[0].iov_len = sizeof(hdr);
	if (p->tx_tfm) {
		ret = puma_tag(p->tx_tfm, p->tx_ctr++, vec, nvec, tag);
		if (ret)
			return ret;
	}
	/* Header, payload and tag leave in one segment train. */
	ret = p->xops->send(p, vec, nvec, len + sizeof(hdr), p->tx_tfm);
	if (ret)
		return ret;
	puma_count_n(PUMA_STAT_BYTES_TX, len + sizeof(hdr));
	if (!p->tx_tfm)
		return 0;
	tvec.iov_base = tag;
	tvec.iov_len = sizeof(tag);
	ret = p->xops->send(p, &tvec, 1, sizeof(tag), false);
	if (ret)
		return ret;
	puma_count_n(PUMA_STAT_BYTES_TX, sizeof(tag));
	return 0;
}

int puma_send_small(struct puma_peer *p, u16 type, u64 req, void *payload,
		    size_t len)
{
	struct kvec vec[2] = { { }, { .iov_base = payload, .iov_len = len } };
	int ret;

	mutex_lock(&p->tx_mutex);
	ret = puma_send(p, type, 0, req, vec, len ? 2 : 1, len);
	mutex_unlock(&p->tx_mutex);
	return ret;
}

/*
 * Seal and send consecutive puts as one batch; caller holds p->tx_mutex.
 * A page that cannot be sealed is not sent, which fails the send: the
 * connection is then shut down as for any failed send.
 */
static int puma_send_puts(struct puma_peer *p, struct list_head *items,
			  unsigned int n)
{
	struct kvec vec[2 + PUMA_BATCH_MAX];
	struct puma_batch batch = { .count = cpu_to_le32(n) };
	struct puma_txbuf *b;
	unsigned int i = 2;
	int ret;

	lockdep_assert_held(&p->tx_mutex);
	if (!p->seal)
		return -ENOMEM;
	vec[1].iov_base = &batch;
	vec[1].iov_len = sizeof(batch);
	list_for_each_entry(b, items, node) {
		ret = puma_seal_page(p->seal, (struct puma_key *)b->payload,
				     b->version,
				     b->payload + sizeof(struct puma_key));
		if (ret)
			return ret;
		vec[i].iov_base = b->payload;
		vec[i++].iov_len = PUMA_PUT_ITEM;
	}
	return puma_send(p, PUMA_MSG_PUT, 0, 0, vec, i,
			 sizeof(batch) + n * PUMA_PUT_ITEM);
}

void puma_shutdown(struct puma_peer *p)
{
	p->xops->shutdown(p);
}

/* fault_inval_error_ms: fail the INVAL @b?  Return: the delay, or 0. */
static unsigned int puma_fault_inval(struct puma_peer *p,
				     const struct puma_txbuf *b)
{
	unsigned int ms;

	if (b->type != PUMA_MSG_INVAL || !READ_ONCE(fault_inval_error_ms))
		return 0;
	ms = xchg(&fault_inval_error_ms, 0);
	if (ms) {
		msleep(ms);
		pr_info("peer %s: test: INVAL send failed\n", p->name);
	}
	return ms;
}

void puma_tx_work(struct work_struct *work)
{
	struct puma_peer *p = container_of(work, struct puma_peer, tx_work);
	unsigned int noio = memalloc_noio_save();
	unsigned int fault = 0;
	bool shut = false;
	int ret = 0;

	mutex_lock(&p->tx_mutex);
	for (;;) {
		struct puma_txbuf *b, *tmp;
		unsigned long flags;
		unsigned int n = 0;
		LIST_HEAD(items);

		spin_lock_irqsave(&p->lock, flags);
		list_for_each_entry_safe(b, tmp, &p->txq, node) {
			if (n && (b->type != PUMA_MSG_PUT ||
				  list_first_entry(&items, struct puma_txbuf,
						   node)->type != PUMA_MSG_PUT ||
				  n == PUMA_BATCH_MAX))
				break;
			list_move_tail(&b->node, &items);
			n++;
		}
		p->txq_len -= n;
		spin_unlock_irqrestore(&p->lock, flags);
		if (!n)
			break;
		b = list_first_entry(&items, struct puma_txbuf, node);
		if (!ret)
			fault = puma_fault_inval(p, b);
		if (ret) {
			/* The connection is failing: drop the rest. */
		} else if (fault) {
			ret = -EIO;
		} else if (b->type == PUMA_MSG_PUT) {
			ret = puma_send_puts(p, &items, n);
		} else {
			struct kvec vec[2] = { { }, { .iov_base = b->payload,
						      .iov_len = b->len } };

			ret = puma_send(p, b->type, b->flags, b->req, vec,
					b->len ? 2 : 1, b->len);
		}
		if (ret && !shut) {
			/*
			 * What is dropped here (INVALs, PUTs the index
			 * already lists) must not be overtaken: shut the
			 * connection before anyone else may send on it,
			 * i.e. before tx_mutex is released.  A get sent
			 * later would reach a lender that missed them.
			 */
			if (fault)
				msleep(fault);
			puma_shutdown(p);
			shut = true;
		}
		list_for_each_entry_safe(b, tmp, &items, node)
			puma_txbuf_free(b);
	}
	mutex_unlock(&p->tx_mutex);
	memalloc_noio_restore(noio);
}

/**
 * puma_peer_get - ask lender @id for the pages of @req and wait
 * @id: the lender
 * @req: count, fkey, index[] and page[] (of locked folios) set by the caller
 *
 * On return req->hits has a bit set for each page filled with the
 * lender's blob: ciphertext in the page, its tag in req->tag.  The caller
 * still opens it (puma_open_page()) and checks that the file did not
 * change.
 *
 * Return: 0, or -errno (no hit then).
 */
int puma_peer_get(int id, struct puma_get_req *req)
{
	size_t len = sizeof(struct puma_batch) +
		     req->count * sizeof(struct puma_key);
	struct puma_batch *batch;
	struct puma_key *keys;
	struct puma_txbuf *b;
	struct puma_peer *p;
	unsigned long flags, left;
	bool direct = false;
	unsigned int i;
	ktime_t t0;
	int ret;

	b = kmalloc(sizeof(*b) + len, GFP_NOIO);
	if (!b)
		return -ENOMEM;
	b->type = PUMA_MSG_GET;
	b->flags = puma_cfg.exclusive ? PUMA_GET_EXCLUSIVE : 0;
	b->len = len;
	b->pooled = false;
	batch = (struct puma_batch *)b->payload;
	batch->count = cpu_to_le32(req->count);
	batch->hits = 0;
	keys = (struct puma_key *)(batch + 1);
	for (i = 0; i < req->count; i++)
		puma_key_fill(&keys[i], &req->fkey, req->index[i]);
	req->hits = 0;
	req->error = 0;

	spin_lock_irqsave(&puma_peers_lock, flags);
	p = puma_peer_find(id);
	if (!p || p->lender_side) {
		spin_unlock_irqrestore(&puma_peers_lock, flags);
		kfree(b);
		return -ENOTCONN;
	}
	kref_get(&p->ref);
	spin_lock(&p->lock);
	req->id = ++p->next_req;
	b->req = req->id;
	list_add_tail(&req->node, &p->gets);
	/*
	 * The GET would go first (puma_txq_slot()) and no one is sending:
	 * send it from this task.  Waking the sending worker, maybe on an
	 * idle vCPU, costs a guest IPI and a host wakeup per get.  Owning
	 * tx_mutex keeps the order: what was sent before is on the wire,
	 * what is queued waits for the mutex.
	 */
	if (p->state == PUMA_PEER_READY && puma_txq_slot(p, b) == p->txq.next)
		direct = mutex_trylock(&p->tx_mutex);
	spin_unlock(&p->lock);
	t0 = ktime_get();
	ret = direct ? 0 : puma_peer_enqueue(p, b);
	spin_unlock_irqrestore(&puma_peers_lock, flags);
	if (direct) {
		struct kvec vec[2] = { { }, { .iov_base = b->payload,
					      .iov_len = len } };

		/*
		 * On failure the receiver sees the connection end and fails
		 * every get in flight, this one too, as with a worker's send.
		 */
		if (puma_send(p, PUMA_MSG_GET, b->flags, b->req, vec, 2, len))
			puma_shutdown(p);
		mutex_unlock(&p->tx_mutex);
		kfree(b);
	} else if (ret) {
		kfree(b);
		spin_lock_irqsave(&p->lock, flags);
		list_del_init(&req->node);
		spin_unlock_irqrestore(&p->lock, flags);
		goto out_put;
	}

	left = usecs_to_jiffies(READ_ONCE(puma_cfg.get_timeout_us));
	left = wait_for_completion_timeout(&req->done, left);
	if (!left) {
		bool mine;

		spin_lock_irqsave(&p->lock, flags);
		mine = !list_empty(&req->node);
		list_del_init(&req->node);
		spin_unlock_irqrestore(&p->lock, flags);
		if (mine) {
			puma_count(PUMA_STAT_GET_TIMEOUTS);
			puma_rtt_sample(ktime_to_ns(ktime_sub(ktime_get(), t0)));
			ret = -ETIMEDOUT;
			goto out_put;
		}
		/*
		 * The receiver (an answer) or puma_peer_down() (the end of
		 * the connection) took it and completes it shortly.
		 */
		wait_for_completion(&req->done);
	}
	puma_rtt_sample(ktime_to_ns(ktime_sub(ktime_get(), t0)));
	ret = req->error;
out_put:
	puma_peer_put(p);
	return ret;
}

/**
 * puma_peer_broadcast - send an empty message to every borrower
 * @type: PUMA_MSG_SUSPEND or PUMA_MSG_RESUME
 */
void puma_peer_broadcast(u16 type)
{
	struct puma_txbuf *b;
	unsigned long flags;
	int id;

	spin_lock_irqsave(&puma_peers_lock, flags);
	for (id = 1; id <= PUMA_MAX_PEERS; id++) {
		struct puma_peer *p = puma_peers[id];

		if (!p || !p->lender_side)
			continue;
		b = kzalloc(sizeof(*b), GFP_NOWAIT | __GFP_NOWARN);
		if (!b)
			continue;
		b->type = type;
		if (puma_peer_enqueue(p, b))
			kfree(b);
	}
	spin_unlock_irqrestore(&puma_peers_lock, flags);
}

int puma_tx_init(void)
{
	unsigned int i;

	puma_wq = alloc_workqueue("puma_tx", WQ_MEM_RECLAIM | WQ_UNBOUND, 0);
	if (!puma_wq)
		return -ENOMEM;
	puma_pool = kvcalloc(put_buffers, sizeof(*puma_pool), GFP_KERNEL);
	if (!puma_pool)
		goto out_free;
	for (i = 0; i < put_buffers; i++) {
		puma_pool[i] = kmalloc(sizeof(*puma_pool[i]) + PUMA_PUT_ITEM,
				       GFP_KERNEL);
		if (!puma_pool[i])
			goto out_free;
		puma_pool[i]->pooled = true;
		puma_pool_free++;
	}
	return 0;

out_free:
	while (puma_pool && puma_pool_free)
		kfree(puma_pool[--puma_pool_free]);
	kvfree(puma_pool);
	destroy_workqueue(puma_wq);
	return -ENOMEM;
}

void puma_tx_exit(void)
{
	destroy_workqueue(puma_wq);
	if (puma_pool_free != put_buffers)
		pr_warn("%u put buffers leaked\n",
			put_buffers - puma_pool_free);
	while (puma_pool_free)
		kfree(puma_pool[--puma_pool_free]);
	kvfree(puma_pool);
}
