// SPDX-License-Identifier: GPL-2.0
/*
 * A lender accepts borrowers: one listening socket and thread, a bound on
 * the connections still in the handshake (preauth_max; a new one evicts
 * the oldest), and the reaping of lender-side peers whose connection
 * ended.
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

static unsigned int preauth_max = 4;
module_param(preauth_max, uint, 0644);
MODULE_PARM_DESC(preauth_max,
		 "Lender: connections in the handshake at most; a new one evicts the oldest (4)");

static DEFINE_MUTEX(puma_listen_mutex);
static struct socket *puma_lsock;
static struct task_struct *puma_lthread;

/* Free lender-side peers whose connection ended. */
static void puma_reap(void)
{
	puma_peer_stop_each(PUMA_PEERS_ENDED);
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
		    READ_ONCE(q->dead) || q->shm)
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
		if (kernel_getpeername(sock, &p->addr.sa) >= 0) {
			puma_addr_normalize(&p->addr);
			puma_addr_print(p->name, sizeof(p->name), &p->addr,
					true);
		}
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
	union puma_addr sa = { };
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
	/*
	 * One dual-stack socket takes IPv4 and IPv6 borrowers (IPv4 ones
	 * as v4-mapped addresses); a guest without IPv6 gets an IPv4 one.
	 */
	ret = sock_create_kern(&init_net, AF_INET6, SOCK_STREAM, IPPROTO_TCP,
			       &sock);
	if (!ret) {
		sock->sk->sk_ipv6only = false;
		sa.v6.sin6_family = AF_INET6;
		sa.v6.sin6_port = htons(puma_cfg.port);
	} else if (ret == -EAFNOSUPPORT) {
		ret = sock_create_kern(&init_net, AF_INET, SOCK_STREAM,
				       IPPROTO_TCP, &sock);
		sa.v4.sin_family = AF_INET;
		sa.v4.sin_port = htons(puma_cfg.port);
	}
	if (ret)
		goto out_unlock;
	sock_set_reuseaddr(sock->sk);
	sock->sk->sk_rcvtimeo = HZ / 2;
	ret = kernel_bind(sock, &sa.sa, puma_addr_len(&sa));
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
