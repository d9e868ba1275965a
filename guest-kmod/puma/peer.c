// SPDX-License-Identifier: GPL-2.0
/*
 * Peers: one in-kernel TCP connection per (borrower, lender) pair, or,
 * for a pair on one host, one over shared memory (shm.c); the transport
 * is a struct puma_xport_ops under the same framing, handshake and tags
 * (the TCP one is below).  The connection's state is in peer.h.  This file keeps the table of peers,
 * their life (connect, handshake, receive loop, end) and the control
 * commands; tx.c sends (the ordered queue, puts, invalidations, gets),
 * rx.c receives and dispatches, handshake.c authenticates and listen.c
 * accepts borrowers on a lender.
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

#define PUMA_RECONNECT		HZ

/*
 * Fault injection for the lab: widen the window between a connection's
 * end and the failing of the gets it leaves pending, so that the tests
 * can make those gets time out meanwhile (test_puma_hostile.py).
 */
static unsigned int fault_down_delay_ms;
module_param(fault_down_delay_ms, uint, 0644);
MODULE_PARM_DESC(fault_down_delay_ms,
		 "Test only: sleep this long before failing each get pending at a disconnection (0)");

DEFINE_SPINLOCK(puma_peers_lock);
struct puma_peer *puma_peers[PUMA_MAX_PEERS + 1];
static unsigned int puma_rotor;

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

void puma_peer_put(struct puma_peer *p)
{
	kref_put(&p->ref, puma_peer_release);
}

/* Caller holds puma_peers_lock. */
struct puma_peer *puma_peer_find(int id)
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

static int puma_connect(struct puma_peer *p)
{
	struct socket *sock;
	int ret;

	ret = sock_create_kern(&init_net, p->addr.sa.sa_family, SOCK_STREAM,
			       IPPROTO_TCP, &sock);
	if (ret)
		return ret;
	sock->sk->sk_sndtimeo = 3 * HZ;
	ret = kernel_connect(sock, &p->addr.sa, puma_addr_len(&p->addr), 0);
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

/* TCP: a borrower connects to its lender; a lender got its socket. */
static int puma_tcp_connect(struct puma_peer *p)
{
	if (!p->lender_side) {
		int ret = puma_connect(p);

		if (ret)
			return ret;
	}
	puma_sock_setup(p->sock);
	return 0;
}

static int puma_tcp_send(struct puma_peer *p, struct kvec *vec,
			 unsigned int nvec, size_t len, bool more)
{
	struct msghdr msg = { .msg_flags = MSG_NOSIGNAL };
	int ret;

	if (!p->sock)
		return -ENOTCONN;
	if (more)
		msg.msg_flags |= MSG_MORE;
	ret = kernel_sendmsg(p->sock, &msg, vec, nvec, len);
	if (ret < 0)
		return ret;
	return ret == len ? 0 : -EIO;
}

static int puma_tcp_recv(struct puma_peer *p, void *buf, size_t len)
{
	struct kvec vec = { .iov_base = buf, .iov_len = len };
	struct msghdr msg = { };

	return kernel_recvmsg(p->sock, &msg, &vec, 1, len, MSG_WAITALL);
}

static void puma_tcp_shutdown(struct puma_peer *p)
{
	mutex_lock(&p->sock_mutex);
	if (p->sock)
		kernel_sock_shutdown(p->sock, SHUT_RDWR);
	mutex_unlock(&p->sock_mutex);
}

static void puma_tcp_release(struct puma_peer *p)
{
	mutex_lock(&p->sock_mutex);
	if (p->sock)
		sock_release(p->sock);
	p->sock = NULL;
	mutex_unlock(&p->sock_mutex);
}

const struct puma_xport_ops puma_tcp_ops = {
	.name = "tcp",
	.connect = puma_tcp_connect,
	.send = puma_tcp_send,
	.recv = puma_tcp_recv,
	.shutdown = puma_tcp_shutdown,
	.release = puma_tcp_release,
};

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
	p->xops->release(p);

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
		if (p->xops->connect(p)) {
			schedule_timeout_interruptible(PUMA_RECONNECT);
			continue;
		}
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
			puma_heartbeat_start(p);
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
		/* A failed send shows as a connection error. */
		if (reason == PUMA_ERR_IO && p->xops->error)
			reason = p->xops->error(p) ?: reason;
		puma_peer_down(p, reason);
		if (p->lender_side && !p->xops->persistent)
			break;
		schedule_timeout_interruptible(PUMA_RECONNECT);
	}
	memalloc_noio_restore(noio);
	WRITE_ONCE(p->dead, true);
	while (!kthread_should_stop())
		schedule_timeout_interruptible(HZ);
	return 0;
}

struct puma_peer *puma_peer_alloc(bool lender_side)
{
	struct puma_peer *p = kzalloc(sizeof(*p), GFP_KERNEL);

	if (!p)
		return NULL;
	kref_init(&p->ref);
	p->lender_side = lender_side;
	p->xops = &puma_tcp_ops;
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
int puma_peer_start(struct puma_peer *p, struct socket *sock)
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
void puma_peer_stop(struct puma_peer *p)
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

static struct puma_peer *puma_peer_by_addr(const union puma_addr *sa)
{
	unsigned long flags;
	struct puma_peer *p = NULL;
	int id;

	spin_lock_irqsave(&puma_peers_lock, flags);
	for (id = 1; id <= PUMA_MAX_PEERS; id++) {
		struct puma_peer *q = puma_peers[id];

		if (q && !q->lender_side &&
		    puma_addr_equal(&q->addr, sa, true)) {
			p = q;
			break;
		}
	}
	spin_unlock_irqrestore(&puma_peers_lock, flags);
	return p;
}

DEFINE_MUTEX(puma_peers_mutex);	/* add/del/unload */

/**
 * puma_peer_add - connect to a lender, and keep reconnecting
 * @spec: "IPv4:port" or "[IPv6%scope]:port" (see addr.c), then optionally
 *	  a space and the pair's key (8 to 64 bytes, up to the end of the
 *	  line); without one, the default key
 *
 * Return: 0 or -errno.
 */
int puma_peer_add(const char *spec)
{
	size_t n = strcspn(spec, " \n"), key_len;
	const char *key = skip_spaces(spec + n);
	union puma_addr sa;
	struct puma_peer *p;
	char addr[64];
	int ret;

	if (n >= sizeof(addr))
		return -EINVAL;
	memcpy(addr, spec, n);
	addr[n] = '\0';
	ret = puma_addr_parse(addr, true, &sa) ?: puma_seal_ready();
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
	puma_addr_print(p->name, sizeof(p->name), &sa, true);
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
	union puma_addr sa;
	struct puma_peer *p;
	char addr[64];
	int ret;

	if (strscpy(addr, spec, sizeof(addr)) < 0)
		return -EINVAL;
	ret = puma_addr_parse(strim(addr), true, &sa);
	if (ret)
		return ret;
	mutex_lock(&puma_peers_mutex);
	p = puma_peer_by_addr(&sa);
	if (p)
		puma_peer_stop(p);
	mutex_unlock(&puma_peers_mutex);
	return p ? 0 : -ENOENT;
}

/* Does @which select @p?  Caller holds puma_peers_lock. */
static bool puma_peer_selected(const struct puma_peer *p,
			       enum puma_peer_which which)
{
	lockdep_assert_held(&puma_peers_lock);
	switch (which) {
	case PUMA_PEERS_LENDER_SIDE:
		return p->lender_side;
	case PUMA_PEERS_BORROWER_SIDE:
		return !p->lender_side;
	case PUMA_PEERS_ENDED:
		return p->lender_side && READ_ONCE(p->dead);
	default:
		return true;
	}
}

/**
 * puma_peer_stop_each - stop every peer @which selects
 * @which: all, one side, or the lender-side peers whose connection ended
 *
 * Takes puma_peers_mutex; each peer selected goes as with puma_peer_del().
 */
void puma_peer_stop_each(enum puma_peer_which which)
{
	unsigned long flags;
	int id;

	mutex_lock(&puma_peers_mutex);
	for (id = 1; id <= PUMA_MAX_PEERS; id++) {
		struct puma_peer *p;

		spin_lock_irqsave(&puma_peers_lock, flags);
		p = puma_peers[id];
		if (p && !puma_peer_selected(p, which))
			p = NULL;
		spin_unlock_irqrestore(&puma_peers_lock, flags);
		if (p)
			puma_peer_stop(p);
	}
	mutex_unlock(&puma_peers_mutex);
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
	puma_peer_stop_each(lender_side ? PUMA_PEERS_LENDER_SIDE :
					  PUMA_PEERS_BORROWER_SIDE);
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
			       p->lender_side && !p->shm ? "-" : p->name,
			       puma_state_names[p->state],
			       p->suspended ? " suspended" : "", p->txq_len,
			       puma_reason_str(p->last_reason));
	}
	spin_unlock_irqrestore(&puma_peers_lock, flags);
	return n;
}

int puma_peer_init(void)
{
	int ret = puma_tx_init();

	if (ret)
		return ret;
	ret = puma_shm_init();
	if (ret)
		puma_tx_exit();
	return ret;
}

void puma_peer_exit(void)
{
	puma_listen_set(false);
	puma_peer_stop_each(PUMA_PEERS_ALL);
	puma_shm_exit();
	puma_tx_exit();
}
