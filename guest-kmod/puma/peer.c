// SPDX-License-Identifier: GPL-2.0
/*
 * Peers: one in-kernel TCP connection per (borrower, lender) pair; the
 * connection's state is in peer.h, its handshake in handshake.c.
 *
 * The never-stale rule needs the puts, invalidations and gets of a page to
 * reach the lender in the order the borrower decided them, so each
 * connection has exactly one ordered send queue (txq).  Puts are queued
 * from the put hook with interrupts off, so their data is copied into a
 * preallocated buffer (puma_put_pool) and the queue is drained by a work
 * item that sends consecutive puts as one batch of up to PUMA_BATCH_MAX
 * pages.  A get overtakes the puts of other pages at the tail of the
 * queue, never an invalidation (puma_txq_slot()); when it would go first and no one is
 * sending, the reading task sends it itself (no worker wakeup on the
 * latency path).  The socket's send buffer is kept small so that the
 * backlog stays in txq.  The reading task sleeps until the answer or a
 * timeout; answers carry the request id, so a late answer
 * finds no request and is dropped.  On a lender, the receiving thread
 * answers gets itself.  A failed send drops what is queued and shuts the
 * connection down before another sender may use it, since a get sent
 * after dropped puts or invalidations could find an older copy.
 *
 * The pages a borrower puts leave sealed (seal.c): the put hook copies the
 * plain page into the buffer with the version the index gave its put,
 * and the send worker encrypts it in place, just before it goes out.  A
 * GET_REPLY's blobs are copied into the waiting pages as they are, with
 * their tags beside; the reading task checks and decrypts them (get.c).
 *
 * Each connection has one kernel thread that connects (borrower side),
 * runs the handshake (handshake.c: mutual proof of the pair's key, then
 * one key per direction), then reads messages.  Every message after the
 * handshake carries a 16-byte tag: HMAC-SHA256 with the key of its
 * direction over its 64-bit sequence number, header and payload.  The
 * pair's key is the peer's own (given with "peers add IP:PORT KEY" on a
 * borrower, with "borrower_keys add IP KEY" on a lender), else the
 * default key.
 *
 * A lender bounds what unauthenticated clients cost it: at most
 * preauth_max connections may be in the handshake at once (a newer one
 * evicts the oldest), a handshake must be over in handshake_timeout_ms
 * whatever the peer sends meanwhile, and the big receive and reply
 * buffers are only allocated once the peer proved it has the key.
 *
 * Every header and payload is checked by proto.c before use; any failure
 * (a wrong tag too) closes the connection with a logged reason, counted
 * per reason.  When a
 * connection closes, the borrower forgets every page the lender held
 * (puma_index_drop_peer()) and the lender frees every page of that
 * borrower, so nothing survives into the next connection.
 *
 * Implementation: puma_peers[] is the table of peers by id (1 ..
 * PUMA_MAX_PEERS), under puma_peers_lock.  Lock order:
 * puma_index_lock -> puma_peers_lock -> peer->lock -> puma_pool_lock;
 * all are taken irqsave since the put hook runs with interrupts off.
 * peer->tx_mutex serialises senders and owns tx_seq; peer->sock_mutex
 * guards the socket pointer against shutdown from another thread.
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

static unsigned int put_buffers = 1024;
module_param(put_buffers, uint, 0444);
MODULE_PARM_DESC(put_buffers,
		 "Pages of preallocated buffers for puts in flight (1024)");

/*
 * Fault injection for the lab: widen the window between a connection's
 * end and the failing of the gets it leaves pending, so that the tests
 * can make those gets time out meanwhile (test_puma_hostile.py).
 */
static unsigned int fault_down_delay_ms;
module_param(fault_down_delay_ms, uint, 0644);
MODULE_PARM_DESC(fault_down_delay_ms,
		 "Test only: sleep this long before failing each get pending at a disconnection (0)");

/*
 * Fault injection for the lab: the next INVAL the send worker takes is
 * not sent; after this long it fails as a send error would, and the
 * worker waits as long again before shutting the connection down.
 */
static unsigned int fault_inval_error_ms;
module_param(fault_inval_error_ms, uint, 0644);
MODULE_PARM_DESC(fault_inval_error_ms,
		 "Test only: fail the next INVAL send after this long, shut down as long after (0)");

static unsigned int preauth_max = 4;
module_param(preauth_max, uint, 0644);
MODULE_PARM_DESC(preauth_max,
		 "Lender: connections in the handshake at most; a new one evicts the oldest (4)");

#define PUMA_TXQ_EXTRA		1024	/* queued besides puts */
#define PUMA_MSG_TIMEOUT	(10 * HZ)	/* a started message */
#define PUMA_RECONNECT		HZ

static DEFINE_SPINLOCK(puma_peers_lock);
static struct puma_peer *puma_peers[PUMA_MAX_PEERS + 1];
static unsigned int puma_rotor;

static DEFINE_SPINLOCK(puma_pool_lock);
static struct puma_txbuf **puma_pool;
static unsigned int puma_pool_free;
static struct workqueue_struct *puma_wq;

static DEFINE_MUTEX(puma_listen_mutex);
static struct socket *puma_lsock;
static struct task_struct *puma_lthread;

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

static void puma_txbuf_free(struct puma_txbuf *b)
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

static void puma_peer_release(struct kref *ref)
{
	struct puma_peer *p = container_of(ref, struct puma_peer, ref);

	crypto_free_shash(p->tx_tfm);
	crypto_free_shash(p->rx_tfm);
	kvfree(p->rxbuf);
	kvfree(p->replybuf);
	if (p->seal)
		puma_seal_ctx_free(p->seal);
	kfree_sensitive(p);
}

static void puma_peer_put(struct puma_peer *p)
{
	kref_put(&p->ref, puma_peer_release);
}

/* Caller holds puma_peers_lock. */
static struct puma_peer *puma_peer_find(int id)
{
	lockdep_assert_held(&puma_peers_lock);
	if (id <= 0 || id > PUMA_MAX_PEERS)
		return NULL;
	return puma_peers[id];
}

/**
 * puma_peer_pick - the lender a put should go to
 *
 * Return: a lender id, 0 if no lender is connected, -1 if all connected
 * lenders suspended lending.
 */
int puma_peer_pick(void)
{
	unsigned long flags;
	int i, id, ret = 0;

	spin_lock_irqsave(&puma_peers_lock, flags);
	for (i = 0; i < PUMA_MAX_PEERS; i++) {
		struct puma_peer *p;

		id = (puma_rotor + i) % PUMA_MAX_PEERS + 1;
		p = puma_peers[id];
		if (!p || p->lender_side || p->state != PUMA_PEER_READY)
			continue;
		if (p->suspended) {
			ret = -1;
			continue;
		}
		ret = id;
		puma_rotor = id % PUMA_MAX_PEERS;
		break;
	}
	spin_unlock_irqrestore(&puma_peers_lock, flags);
	return ret;
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
	b = kmalloc(sizeof(*b) + sizeof(*inv), GFP_ATOMIC | __GFP_NOWARN);
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
static int puma_tag(struct crypto_shash *tfm, u64 ctr, const struct kvec *vec,
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
static int puma_send(struct puma_peer *p, u16 type, u16 flags, u64 req,
		     struct kvec *vec, unsigned int nvec, size_t len)
{
	struct msghdr msg = { .msg_flags = MSG_NOSIGNAL };
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
	if (!p->sock)
		return -ENOTCONN;
	if (p->tx_tfm) {
		ret = puma_tag(p->tx_tfm, p->tx_ctr++, vec, nvec, tag);
		if (ret)
			return ret;
		/* Header, payload and tag leave in one segment train. */
		msg.msg_flags |= MSG_MORE;
	}
	ret = kernel_sendmsg(p->sock, &msg, vec, nvec, len + sizeof(hdr));
	if (ret < 0)
		return ret;
	if (ret != len + sizeof(hdr))
		return -EIO;
	puma_count_n(PUMA_STAT_BYTES_TX, ret);
	if (!p->tx_tfm)
		return 0;
	msg.msg_flags = MSG_NOSIGNAL;
	tvec.iov_base = tag;
	tvec.iov_len = sizeof(tag);
	ret = kernel_sendmsg(p->sock, &msg, &tvec, 1, sizeof(tag));
	if (ret < 0)
		return ret;
	if (ret != sizeof(tag))
		return -EIO;
	puma_count_n(PUMA_STAT_BYTES_TX, ret);
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

static void puma_shutdown(struct puma_peer *p)
{
	mutex_lock(&p->sock_mutex);
	if (p->sock)
		kernel_sock_shutdown(p->sock, SHUT_RDWR);
	mutex_unlock(&p->sock_mutex);
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

static void puma_tx_work(struct work_struct *work)
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
		b = kzalloc(sizeof(*b), GFP_ATOMIC);
		if (!b)
			continue;
		b->type = type;
		if (puma_peer_enqueue(p, b))
			kfree(b);
	}
	spin_unlock_irqrestore(&puma_peers_lock, flags);
}

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
		struct kvec vec = { .iov_base = buf + got,
				    .iov_len = len - got };
		struct msghdr msg = { };
		int ret;

		if (hs || !idle || got) {
			if (time_after(jiffies, deadline))
				return hs ? PUMA_ERR_HS_TIMEOUT :
					    PUMA_ERR_TIMEOUT;
		} else {
			deadline = jiffies + PUMA_MSG_TIMEOUT;
		}
		ret = kernel_recvmsg(p->sock, &msg, &vec, 1, len - got,
				     MSG_WAITALL);
		if (ret > 0) {
			got += ret;
			puma_count_n(PUMA_STAT_BYTES_RX, ret);
			continue;
		}
		if (ret == 0)
			return PUMA_ERR_IO;
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

static int puma_dispatch(struct puma_peer *p, const struct puma_hdr *h)
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

static int puma_connect(struct puma_peer *p)
{
	struct socket *sock;
	int ret;

	ret = sock_create_kern(&init_net, AF_INET, SOCK_STREAM, IPPROTO_TCP,
			       &sock);
	if (ret)
		return ret;
	sock->sk->sk_sndtimeo = 3 * HZ;
	ret = kernel_connect(sock, (struct sockaddr *)&p->addr,
			     sizeof(p->addr), 0);
	if (ret) {
		sock_release(sock);
		return ret;
	}
	mutex_lock(&p->sock_mutex);
	p->sock = sock;
	mutex_unlock(&p->sock_mutex);
	return 0;
}

static void puma_sock_setup(struct socket *sock)
{
	struct sock *sk = sock->sk;
	int sndbuf = 128 << 10;

	sk->sk_allocation = GFP_NOIO;
	puma_sock_no_task_frag(sk);
	sk->sk_rcvtimeo = HZ / 2;
	sk->sk_sndtimeo = 10 * HZ;
	tcp_sock_set_nodelay(sk);
	/*
	 * Keep the backlog in txq, where a GET can overtake PUTs, not in
	 * the socket: 256 KiB (the kernel doubles it) is a few times the
	 * bandwidth-delay product between guests on one host or rack.
	 */
	sock_setsockopt(sock, SOL_SOCKET, SO_SNDBUF,
			KERNEL_SOCKPTR(&sndbuf), sizeof(sndbuf));
	/* A cut link ends the connection (and its remote pages) in ~10 s. */
	tcp_sock_set_user_timeout(sk, 10000);
	sock_set_keepalive(sk);
	tcp_sock_set_keepidle(sk, 5);
	tcp_sock_set_keepintvl(sk, 2);
	tcp_sock_set_keepcnt(sk, 3);
}

/*
 * Fail the first get still waiting on @p's connection, which is over.
 * It is taken off p->gets and completed under p->lock, the lock a get
 * that times out takes to look at its own node: that get finds itself
 * either still listed (it gives up, and is never touched again here) or
 * taken (it waits for this completion), so a request is never used after
 * its reader returned.  Return: true if there was one.
 */
static bool puma_fail_get(struct puma_peer *p)
{
	unsigned int delay = READ_ONCE(fault_down_delay_ms);
	struct puma_get_req *req;
	unsigned long flags;

	if (delay) {
		spin_lock_irqsave(&p->lock, flags);
		if (list_empty(&p->gets))
			delay = 0;
		spin_unlock_irqrestore(&p->lock, flags);
		if (delay)
			msleep(delay);
	}
	spin_lock_irqsave(&p->lock, flags);
	req = list_first_entry_or_null(&p->gets, struct puma_get_req, node);
	if (req) {
		list_del_init(&req->node);
		req->error = -ECONNRESET;
		complete(&req->done);
	}
	spin_unlock_irqrestore(&p->lock, flags);
	return req;
}

/* The connection is over: nothing of it survives. */
static void puma_peer_down(struct puma_peer *p, int reason)
{
	struct puma_txbuf *b, *btmp;
	unsigned long flags;
	LIST_HEAD(txq);
	bool was_ready;

	spin_lock_irqsave(&p->lock, flags);
	was_ready = p->state == PUMA_PEER_READY;
	p->state = PUMA_PEER_DOWN;
	list_splice_init(&p->txq, &txq);
	p->txq_len = 0;
	spin_unlock_irqrestore(&p->lock, flags);

	puma_shutdown(p);
	cancel_work_sync(&p->tx_work);
	/* A get may be sending from its own task (puma_peer_get()). */
	mutex_lock(&p->tx_mutex);
	crypto_free_shash(p->tx_tfm);
	p->tx_tfm = NULL;
	mutex_unlock(&p->tx_mutex);
	crypto_free_shash(p->rx_tfm);
	p->rx_tfm = NULL;
	list_for_each_entry_safe(b, btmp, &txq, node)
		puma_txbuf_free(b);
	while (puma_fail_get(p))
		;
	if (p->lender_side) {
		if (p->sess)
			puma_store_sess_free(p->sess);
		p->sess = NULL;
	} else {
		puma_index_drop_peer(p->id);
		WRITE_ONCE(p->suspended, false);
	}
	mutex_lock(&p->sock_mutex);
	if (p->sock)
		sock_release(p->sock);
	p->sock = NULL;
	mutex_unlock(&p->sock_mutex);

	p->last_reason = reason;
	if (was_ready || reason != PUMA_ERR_IO) {
		puma_count(PUMA_STAT_DISCONNECTS);
		atomic64_inc(&puma_disconnect_reasons[reason]);
		pr_warn("peer %s: disconnected: %s\n", p->name,
			puma_reason_str(reason));
	}
}

static int puma_peer_thread(void *arg)
{
	struct puma_peer *p = arg;
	unsigned int noio = memalloc_noio_save();
	struct puma_hdr h;
	int reason;

	while (!kthread_should_stop()) {
		if (!p->lender_side && puma_connect(p)) {
			schedule_timeout_interruptible(PUMA_RECONNECT);
			continue;
		}
		puma_sock_setup(p->sock);
		spin_lock_irq(&p->lock);
		p->state = PUMA_PEER_HANDSHAKE;
		spin_unlock_irq(&p->lock);
		reason = puma_handshake(p);
		if (reason && READ_ONCE(p->evicted))
			reason = PUMA_ERR_EVICTED;
		if (!reason && p->lender_side) {
			p->sess = puma_store_sess_new();
			if (!p->sess)
				reason = PUMA_ERR_IO;
		}
		if (!reason) {
			spin_lock_irq(&p->lock);
			p->state = PUMA_PEER_READY;
			spin_unlock_irq(&p->lock);
			spin_lock_irq(&puma_peers_lock);
			p->authed = true;
			spin_unlock_irq(&puma_peers_lock);
			pr_info("peer %s: connected as %s\n", p->name,
				p->lender_side ? "lender" : "borrower");
			if (p->lender_side && puma_lender_suspended())
				puma_peer_broadcast(PUMA_MSG_SUSPEND);
			do {
				reason = puma_recv_msg(p, &h, true);
				if (!reason)
					reason = puma_dispatch(p, &h);
			} while (!reason);
		}
		puma_peer_down(p, reason);
		if (p->lender_side)
			break;
		schedule_timeout_interruptible(PUMA_RECONNECT);
	}
	memalloc_noio_restore(noio);
	WRITE_ONCE(p->dead, true);
	while (!kthread_should_stop())
		schedule_timeout_interruptible(HZ);
	return 0;
}

static struct puma_peer *puma_peer_alloc(bool lender_side)
{
	struct puma_peer *p = kzalloc(sizeof(*p), GFP_KERNEL);

	if (!p)
		return NULL;
	kref_init(&p->ref);
	p->lender_side = lender_side;
	mutex_init(&p->sock_mutex);
	mutex_init(&p->tx_mutex);
	spin_lock_init(&p->lock);
	INIT_LIST_HEAD(&p->txq);
	INIT_LIST_HEAD(&p->gets);
	INIT_WORK(&p->tx_work, puma_tx_work);
	/* rxbuf and replybuf come with authentication (puma_handshake()). */
	if (!lender_side) {
		p->seal = puma_seal_ctx_alloc(GFP_KERNEL);
		if (!p->seal) {
			puma_peer_put(p);
			return NULL;
		}
	}
	return p;
}

/* Give @p an id and start its thread; it owns @sock if not NULL. */
static int puma_peer_start(struct puma_peer *p, struct socket *sock)
{
	unsigned long flags;
	int id;

	spin_lock_irqsave(&puma_peers_lock, flags);
	for (id = 1; id <= PUMA_MAX_PEERS; id++)
		if (!puma_peers[id])
			break;
	if (id <= PUMA_MAX_PEERS) {
		p->id = id;
		puma_peers[id] = p;
	}
	spin_unlock_irqrestore(&puma_peers_lock, flags);
	if (id > PUMA_MAX_PEERS)
		return -ENOSPC;
	p->sock = sock;
	p->thread = kthread_run(puma_peer_thread, p, "puma-peer/%d", id);
	if (IS_ERR(p->thread)) {
		int ret = PTR_ERR(p->thread);

		spin_lock_irqsave(&puma_peers_lock, flags);
		puma_peers[id] = NULL;
		spin_unlock_irqrestore(&puma_peers_lock, flags);
		p->sock = NULL;
		return ret;
	}
	get_task_struct(p->thread);
	return 0;
}

/* Remove @p from the table, stop its thread, drop it. */
static void puma_peer_stop(struct puma_peer *p)
{
	unsigned long flags;

	spin_lock_irqsave(&puma_peers_lock, flags);
	puma_peers[p->id] = NULL;
	spin_unlock_irqrestore(&puma_peers_lock, flags);
	puma_shutdown(p);
	kthread_stop(p->thread);
	put_task_struct(p->thread);
	/* The thread always ends through puma_peer_down(). */
	puma_peer_put(p);
}

static int puma_parse_addr(const char *spec, struct sockaddr_in *sa)
{
	char buf[32];
	char *colon;
	u16 port;

	if (strscpy(buf, spec, sizeof(buf)) < 0)
		return -EINVAL;
	strim(buf);
	colon = strchr(buf, ':');
	if (!colon)
		return -EINVAL;
	*colon = '\0';
	if (kstrtou16(colon + 1, 10, &port) || !port)
		return -EINVAL;
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(port);
	if (!in4_pton(buf, -1, (u8 *)&sa->sin_addr.s_addr, -1, NULL))
		return -EINVAL;
	return 0;
}

static struct puma_peer *puma_peer_by_addr(const struct sockaddr_in *sa)
{
	unsigned long flags;
	struct puma_peer *p = NULL;
	int id;

	spin_lock_irqsave(&puma_peers_lock, flags);
	for (id = 1; id <= PUMA_MAX_PEERS; id++) {
		struct puma_peer *q = puma_peers[id];

		if (q && !q->lender_side &&
		    q->addr.sin_addr.s_addr == sa->sin_addr.s_addr &&
		    q->addr.sin_port == sa->sin_port) {
			p = q;
			break;
		}
	}
	spin_unlock_irqrestore(&puma_peers_lock, flags);
	return p;
}

static DEFINE_MUTEX(puma_peers_mutex);	/* add/del/unload */

/**
 * puma_peer_add - connect to a lender, and keep reconnecting
 * @spec: "IPv4:port", then optionally a space and the pair's key (8 to 64
 *	  bytes, up to the end of the line); without one, the default key
 *
 * Return: 0 or -errno.
 */
int puma_peer_add(const char *spec)
{
	size_t n = strcspn(spec, " \n"), key_len;
	const char *key = skip_spaces(spec + n);
	struct sockaddr_in sa;
	struct puma_peer *p;
	char addr[32];
	int ret;

	if (n >= sizeof(addr))
		return -EINVAL;
	memcpy(addr, spec, n);
	addr[n] = '\0';
	ret = puma_parse_addr(addr, &sa) ?: puma_seal_ready();
	if (ret)
		return ret;
	key_len = strlen(key);
	if (key_len && puma_key_parse(key, &key_len))
		return -EINVAL;
	mutex_lock(&puma_peers_mutex);
	ret = -EEXIST;
	if (puma_peer_by_addr(&sa))
		goto out_unlock;
	ret = -ENOMEM;
	p = puma_peer_alloc(false);
	if (!p)
		goto out_unlock;
	p->addr = sa;
	memcpy(p->key, key, key_len);
	p->key_len = key_len;
	snprintf(p->name, sizeof(p->name), "%pI4:%u", &sa.sin_addr,
		 ntohs(sa.sin_port));
	ret = puma_peer_start(p, NULL);
	if (ret)
		puma_peer_put(p);
out_unlock:
	mutex_unlock(&puma_peers_mutex);
	return ret;
}

/**
 * puma_peer_del - disconnect from a lender and forget its pages
 * @spec: the lender's address as given to puma_peer_add()
 *
 * Return: 0 or -errno.
 */
int puma_peer_del(const char *spec)
{
	struct sockaddr_in sa;
	struct puma_peer *p;
	int ret;

	ret = puma_parse_addr(spec, &sa);
	if (ret)
		return ret;
	mutex_lock(&puma_peers_mutex);
	p = puma_peer_by_addr(&sa);
	if (p)
		puma_peer_stop(p);
	mutex_unlock(&puma_peers_mutex);
	return p ? 0 : -ENOENT;
}

/**
 * puma_peer_stop_side - end every connection of one side
 * @lender_side: true: the borrowers connected to us (we lend to them);
 *		 false: the lenders we connect to (we borrow from them)
 *
 * Each goes as with puma_peer_del(): its connection closes, a lender
 * frees the borrower's pages, a borrower forgets the pages the lender
 * held (puma_peer_down()), and no reconnection follows.
 */
void puma_peer_stop_side(bool lender_side)
{
	unsigned long flags;
	int id;

	mutex_lock(&puma_peers_mutex);
	for (id = 1; id <= PUMA_MAX_PEERS; id++) {
		struct puma_peer *p;

		spin_lock_irqsave(&puma_peers_lock, flags);
		p = puma_peers[id];
		if (p && p->lender_side != lender_side)
			p = NULL;
		spin_unlock_irqrestore(&puma_peers_lock, flags);
		if (p)
			puma_peer_stop(p);
	}
	mutex_unlock(&puma_peers_mutex);
}

static const char *const puma_state_names[] = {
	[PUMA_PEER_DOWN] = "down",
	[PUMA_PEER_HANDSHAKE] = "handshake",
	[PUMA_PEER_READY] = "ready",
};

/**
 * puma_peer_show - one line per peer, for sysfs
 * @buf: output
 * @size: its size
 *
 * Return: bytes written.
 */
ssize_t puma_peer_show(char *buf, size_t size)
{
	unsigned long flags;
	ssize_t n = 0;
	int id;

	spin_lock_irqsave(&puma_peers_lock, flags);
	for (id = 1; id <= PUMA_MAX_PEERS; id++) {
		struct puma_peer *p = puma_peers[id];

		if (!p)
			continue;
		n += scnprintf(buf + n, size - n,
			       "%d %s %s %s%s queued=%u last_error=%s\n",
			       id, p->lender_side ? "borrower" : "lender",
			       p->lender_side ? "-" : p->name,
			       puma_state_names[p->state],
			       p->suspended ? " suspended" : "", p->txq_len,
			       puma_reason_str(p->last_reason));
	}
	spin_unlock_irqrestore(&puma_peers_lock, flags);
	return n;
}

/* Free lender-side peers whose connection ended. */
static void puma_reap(void)
{
	unsigned long flags;
	int id;

	mutex_lock(&puma_peers_mutex);
	for (id = 1; id <= PUMA_MAX_PEERS; id++) {
		struct puma_peer *p;

		spin_lock_irqsave(&puma_peers_lock, flags);
		p = puma_peers[id];
		if (p && !(p->lender_side && READ_ONCE(p->dead)))
			p = NULL;
		spin_unlock_irqrestore(&puma_peers_lock, flags);
		if (p)
			puma_peer_stop(p);
	}
	mutex_unlock(&puma_peers_mutex);
}

/*
 * Lender: make room for one more connection in the handshake.  When
 * preauth_max of them are already there, the oldest is shut down: a
 * flood of clients that never finish the handshake delays a borrower by
 * its round trip at most, and costs one small struct puma_peer and one
 * thread each, for handshake_timeout_ms at most.
 */
static void puma_preauth_evict(void)
{
	struct puma_peer *victim = NULL;
	unsigned int n = 0;
	unsigned long flags;
	int id;

	spin_lock_irqsave(&puma_peers_lock, flags);
	for (id = 1; id <= PUMA_MAX_PEERS; id++) {
		struct puma_peer *q = puma_peers[id];

		if (!q || !q->lender_side || q->authed || q->evicted ||
		    READ_ONCE(q->dead))
			continue;
		n++;
		if (!victim || q->born < victim->born)
			victim = q;
	}
	if (n < max(READ_ONCE(preauth_max), 1U))
		victim = NULL;
	if (victim) {
		WRITE_ONCE(victim->evicted, true);
		kref_get(&victim->ref);
	}
	spin_unlock_irqrestore(&puma_peers_lock, flags);
	if (victim) {
		puma_shutdown(victim);
		puma_peer_put(victim);
	}
}

static int puma_listen_thread(void *arg)
{
	u64 accepted = 0;

	struct socket *lsock = arg;

	while (!kthread_should_stop()) {
		struct puma_peer *p;
		struct socket *sock;
		int ret;

		puma_reap();
		ret = kernel_accept(lsock, &sock, 0);
		if (ret == -EAGAIN || ret == -EINTR)
			continue;
		if (ret) {
			schedule_timeout_interruptible(HZ / 10);
			continue;
		}
		p = READ_ONCE(puma_cfg.lender) ? puma_peer_alloc(true) : NULL;
		if (!p) {
			sock_release(sock);
			continue;
		}
		strscpy(p->name, "incoming", sizeof(p->name));
		kernel_getpeername(sock, (struct sockaddr *)&p->addr);
		snprintf(p->name, sizeof(p->name), "%pI4:%u",
			 &p->addr.sin_addr, ntohs(p->addr.sin_port));
		p->born = ++accepted;
		mutex_lock(&puma_peers_mutex);
		puma_preauth_evict();
		ret = puma_peer_start(p, sock);
		mutex_unlock(&puma_peers_mutex);
		if (ret) {
			sock_release(sock);
			puma_peer_put(p);
		}
	}
	return 0;
}

/**
 * puma_listen_set - start or stop accepting borrowers on puma_cfg.port
 * @on: start if true
 *
 * Return: 0 or -errno.
 */
int puma_listen_set(bool on)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct socket *sock;
	int ret = 0;

	mutex_lock(&puma_listen_mutex);
	if (!on && puma_lthread) {
		kthread_stop(puma_lthread);
		put_task_struct(puma_lthread);
		puma_lthread = NULL;
		sock_release(puma_lsock);
		puma_lsock = NULL;
	}
	if (!on || puma_lthread)
		goto out_unlock;
	ret = sock_create_kern(&init_net, AF_INET, SOCK_STREAM, IPPROTO_TCP,
			       &sock);
	if (ret)
		goto out_unlock;
	sock_set_reuseaddr(sock->sk);
	sock->sk->sk_rcvtimeo = HZ / 2;
	sa.sin_port = htons(puma_cfg.port);
	sa.sin_addr.s_addr = htonl(INADDR_ANY);
	ret = kernel_bind(sock, (struct sockaddr *)&sa, sizeof(sa));
	if (!ret)
		ret = kernel_listen(sock, 16);
	if (ret)
		goto out_release;
	puma_lthread = kthread_run(puma_listen_thread, sock, "puma-listen");
	if (IS_ERR(puma_lthread)) {
		ret = PTR_ERR(puma_lthread);
		puma_lthread = NULL;
		goto out_release;
	}
	get_task_struct(puma_lthread);
	puma_lsock = sock;
	goto out_unlock;

out_release:
	sock_release(sock);
out_unlock:
	mutex_unlock(&puma_listen_mutex);
	return ret;
}

int puma_peer_init(void)
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

void puma_peer_exit(void)
{
	int id;

	puma_listen_set(false);
	mutex_lock(&puma_peers_mutex);
	for (id = 1; id <= PUMA_MAX_PEERS; id++) {
		struct puma_peer *p;
		unsigned long flags;

		spin_lock_irqsave(&puma_peers_lock, flags);
		p = puma_peers[id];
		spin_unlock_irqrestore(&puma_peers_lock, flags);
		if (p)
			puma_peer_stop(p);
	}
	mutex_unlock(&puma_peers_mutex);
	destroy_workqueue(puma_wq);
	if (puma_pool_free != put_buffers)
		pr_warn("%u put buffers leaked\n",
			put_buffers - puma_pool_free);
	while (puma_pool_free)
		kfree(puma_pool[--puma_pool_free]);
	kvfree(puma_pool);
}
