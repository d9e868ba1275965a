// SPDX-License-Identifier: GPL-2.0
/*
 * The same-host transport: the shared memory of an ivshmem-doorbell
 * device (QEMU's docs/specs/ivshmem-spec.rst) between a borrower and a
 * lender that run on one host, instead of TCP.  It carries the same byte
 * stream as a TCP connection (struct puma_xport_ops): the framing, the
 * handshake, the tags and the sealing above it are the code TCP runs.
 *
 * Layout of BAR2 (docs/puma-protocol.md, "Shared memory transport"): a
 * header of two slots (lender's, borrower's: magic, IVPosition, epoch,
 * ack) and two rings' indices, then two byte rings of one power-of-two
 * size, borrower to lender first.  Each index has one writer: the
 * producer's prod, the consumer's cons, both free-running u32.  A side
 * keeps its own indices in memory it alone owns (struct puma_shm) and
 * only publishes them; it reads just the peer's index, once (READ_ONCE),
 * and checks it: prod - cons can never exceed the ring size, and a
 * value that does ends the connection (PUMA_ERR_SHM).  Data is copied
 * out of the ring before anything parses or checks it, and every offset
 * into a ring is masked, so no value the peer writes can make us read
 * or write outside BAR2, loop without bound or allocate.
 *
 * A connection starts with a new random epoch per side: a side zeroes
 * the indices it owns, then publishes its epoch (after a write barrier)
 * and acknowledges the peer's current epoch in its slot.  The connection
 * is up once each side's ack names the other's epoch; it is over as soon
 * as either side's epoch or ack changes (a side that disconnects writes
 * epoch 0), so both sides start every connection from empty rings.  The
 * peer's doorbell id is the IVPosition it wrote in its slot: a hostile
 * peer can only make us ring a wrong id, which QEMU ignores.
 *
 * A doorbell is one MSI-X interrupt (vector 0); waiters sleep on it with
 * a timeout, so a lost doorbell delays, never hangs.  A producer rings
 * at the end of each message and when the ring is full; a consumer rings
 * when it frees space in a ring that was more than a quarter full.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/kthread.h>
#include <linux/log2.h>
#include <linux/pci.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/wait.h>

#include "peer.h"
#include "puma.h"

/* BAR0 registers */
#define PUMA_SHM_IVPOSITION	0x08
#define PUMA_SHM_DOORBELL	0x0c

#define PUMA_SHM_MAGIC		0x314d4850	/* "PHM1" */
#define PUMA_SHM_DATA		4096		/* offset of the first ring */
#define PUMA_SHM_RING_MIN	(64U << 10)
#define PUMA_SHM_RING_MAX	(16U << 20)
#define PUMA_SHM_WAIT		(HZ / 10)	/* a waiter checks again */
#define PUMA_SHM_RECV_WAIT	(HZ / 2)	/* as TCP's sk_rcvtimeo */
#define PUMA_SHM_SEND_TIMEOUT	(10 * HZ)	/* as TCP's sk_sndtimeo */
#define PUMA_SHM_CONNECT_TIMEOUT (5 * HZ)

enum { PUMA_SHM_LENDER, PUMA_SHM_BORROWER };

struct puma_shm_slot {
	__le32 magic;
	__le32 ivpos;
	__le32 epoch;		/* 0: not connected */
	__le32 ack;		/* the peer's epoch this side reset for */
	u8 pad[48];
};

struct puma_shm_idx {
	__le32 prod;
	u8 pad0[60];
	__le32 cons;
	u8 pad1[60];
};

struct puma_shm_hdr {
	struct puma_shm_slot slot[2];	/* lender's, borrower's */
	struct puma_shm_idx ring[2];	/* borrower to lender, back */
};

struct puma_shm {
	struct list_head node;
	struct pci_dev *pdev;
	void __iomem *regs;
	struct puma_shm_hdr *hdr;	/* BAR2, mapped write-back */
	size_t mem_len;
	u32 ring_size;			/* a power of two */
	wait_queue_head_t wq;
	atomic_t irqs;			/* doorbells received */
	bool shut;
	bool bad;			/* the peer broke a ring's rules */
	/* The connection: set by the peer's thread in connect(). */
	int side;			/* PUMA_SHM_LENDER or _BORROWER */
	u32 epoch;
	u32 ack;
	u32 peer_epoch;
	u32 peer_id;			/* U32_MAX: not known yet */
	u32 tx_prod;			/* p->tx_mutex */
	u32 rx_cons;			/* the receiving thread */
};

static LIST_HEAD(puma_shm_devs);
static DEFINE_MUTEX(puma_shm_mutex);	/* puma_shm_devs */

static u8 *puma_shm_ring(struct puma_shm *s, int ring)
{
	return (u8 *)s->hdr + PUMA_SHM_DATA + ring * s->ring_size;
}

static void puma_shm_kick(struct puma_shm *s)
{
	u32 id = READ_ONCE(s->peer_id);

	if (id <= 0xffff)
		writel(id << 16, s->regs + PUMA_SHM_DOORBELL);
}

static irqreturn_t puma_shm_irq(int irq, void *arg)
{
	struct puma_shm *s = arg;

	atomic_inc(&s->irqs);
	wake_up_all(&s->wq);
	return IRQ_HANDLED;
}

static u32 puma_shm_get(const __le32 *field)
{
	return le32_to_cpu(READ_ONCE(*field));
}

static void puma_shm_set(__le32 *field, u32 val)
{
	WRITE_ONCE(*field, cpu_to_le32(val));
}

/* 0 while the connection is up, else why it is not. */
static int puma_shm_alive(struct puma_shm *s)
{
	struct puma_shm_slot *peer = &s->hdr->slot[!s->side];

	if (READ_ONCE(s->bad))
		return -EPROTO;
	if (READ_ONCE(s->shut))
		return -ESHUTDOWN;
	if (puma_shm_get(&peer->epoch) != s->peer_epoch ||
	    puma_shm_get(&peer->ack) != s->epoch)
		return -ECONNRESET;
	return 0;
}

/* The peer broke the ring's rules: end the connection, say why. */
static int puma_shm_bad(struct puma_peer *p, const char *what, u32 used)
{
	struct puma_shm *s = p->shm;

	if (puma_shm_alive(s))	/* a reset, not a lie */
		return -ECONNRESET;
	pr_warn_ratelimited("peer %s: %s ring: %u bytes in a ring of %u: bad index\n",
			    p->name, what, used, s->ring_size);
	/* Whoever else waits on the rings stops too. */
	WRITE_ONCE(s->bad, true);
	wake_up_all(&s->wq);
	return -EPROTO;
}

static int puma_shm_connect(struct puma_peer *p)
{
	struct puma_shm *s = p->shm;
	struct puma_shm_hdr *h = s->hdr;
	struct puma_shm_slot *me = &h->slot[s->side];
	struct puma_shm_slot *peer = &h->slot[!s->side];
	unsigned long deadline = jiffies + PUMA_SHM_CONNECT_TIMEOUT;
	int tx = s->side == PUMA_SHM_BORROWER ? 0 : 1;
	u32 epoch, pa, pe;

	WRITE_ONCE(s->shut, false);
	WRITE_ONCE(s->bad, false);
	do {
		epoch = get_random_u32();
	} while (!epoch || epoch == s->epoch);
	s->epoch = epoch;
	s->ack = 0;
	s->peer_epoch = 0;
	s->tx_prod = 0;
	s->rx_cons = 0;
	WRITE_ONCE(s->peer_id, U32_MAX);
	puma_shm_set(&me->epoch, 0);
	puma_shm_set(&me->ack, 0);
	puma_shm_set(&h->ring[tx].prod, 0);
	puma_shm_set(&h->ring[!tx].cons, 0);
	puma_shm_set(&me->ivpos, readl(s->regs + PUMA_SHM_IVPOSITION));
	puma_shm_set(&me->magic, PUMA_SHM_MAGIC);
	/* The peer that sees the epoch sees the reset before it. */
	virt_wmb();
	puma_shm_set(&me->epoch, epoch);

	for (;;) {
		int seen = atomic_read(&s->irqs);

		if (kthread_should_stop() || READ_ONCE(s->shut))
			return -ESHUTDOWN;
		if (puma_shm_get(&peer->magic) == PUMA_SHM_MAGIC) {
			WRITE_ONCE(s->peer_id, puma_shm_get(&peer->ivpos) &
						0xffff);
			pe = puma_shm_get(&peer->epoch);
			if (pe != s->ack) {
				s->ack = pe;
				/* Our reset and epoch are out before the ack. */
				virt_mb();
				puma_shm_set(&me->ack, pe);
				puma_shm_kick(s);
			}
			pa = puma_shm_get(&peer->ack);
			/* The peer writes its epoch before its ack. */
			virt_rmb();
			pe = puma_shm_get(&peer->epoch);
			if (pe && pa == epoch && pe == s->ack) {
				s->peer_epoch = pe;
				puma_shm_kick(s);
				return 0;
			}
		}
		if (time_after(jiffies, deadline))
			return -ETIMEDOUT;
		wait_event_interruptible_timeout(s->wq,
						 atomic_read(&s->irqs) != seen ||
						 READ_ONCE(s->shut),
						 PUMA_SHM_WAIT);
	}
}

static bool puma_shm_rx_ready(struct puma_shm *s, struct puma_shm_idx *ix)
{
	return puma_shm_get(&ix->prod) != s->rx_cons || puma_shm_alive(s);
}

static int puma_shm_recv(struct puma_peer *p, void *buf, size_t len)
{
	struct puma_shm *s = p->shm;
	int rx = s->side == PUMA_SHM_BORROWER ? 1 : 0;
	struct puma_shm_idx *ix = &s->hdr->ring[rx];
	const u8 *data = puma_shm_ring(s, rx);
	u32 size = s->ring_size, avail, off, n, first;
	long left;
	int ret;

	for (;;) {
		ret = puma_shm_alive(s);
		if (ret)
			return ret;
		avail = puma_shm_get(&ix->prod) - s->rx_cons;
		if (avail > size)
			return puma_shm_bad(p, "receive", avail);
		if (avail)
			break;
		left = wait_event_interruptible_timeout(s->wq,
						puma_shm_rx_ready(s, ix),
						PUMA_SHM_RECV_WAIT);
		if (!left)
			return -EAGAIN;
		if (left < 0)
			return -EINTR;
	}
	/* The bytes up to the prod we read, not whatever came before it. */
	virt_rmb();
	n = min_t(size_t, avail, len);
	off = s->rx_cons & (size - 1);
	first = min(n, size - off);
	memcpy(buf, data + off, first);
	memcpy(buf + first, data, n - first);
	/* Copied out before the space is given back. */
	virt_mb();
	s->rx_cons += n;
	puma_shm_set(&ix->cons, s->rx_cons);
	if (avail > size / 4)
		puma_shm_kick(s);
	return n;
}

static bool puma_shm_tx_ready(struct puma_shm *s, struct puma_shm_idx *ix)
{
	return s->tx_prod - puma_shm_get(&ix->cons) != s->ring_size ||
	       puma_shm_alive(s);
}

static int puma_shm_send(struct puma_peer *p, struct kvec *vec,
			 unsigned int nvec, size_t len, bool more)
{
	struct puma_shm *s = p->shm;
	int tx = s->side == PUMA_SHM_BORROWER ? 0 : 1;
	struct puma_shm_idx *ix = &s->hdr->ring[tx];
	u8 *data = puma_shm_ring(s, tx);
	unsigned long deadline = jiffies + PUMA_SHM_SEND_TIMEOUT;
	u32 size = s->ring_size, used, off, n, first;
	unsigned int i;
	size_t done;
	int ret;

	for (i = 0; i < nvec; i++) {
		const u8 *src = vec[i].iov_base;

		for (done = 0; done < vec[i].iov_len; ) {
			ret = puma_shm_alive(s);
			if (ret)
				return ret;
			used = s->tx_prod - puma_shm_get(&ix->cons);
			if (used > size)
				return puma_shm_bad(p, "send", used);
			if (used == size) {
				puma_shm_kick(s);
				if (time_after(jiffies, deadline))
					return -ETIMEDOUT;
				wait_event_timeout(s->wq,
						   puma_shm_tx_ready(s, ix),
						   PUMA_SHM_WAIT);
				continue;
			}
			/* The consumer is done with the space we reuse. */
			virt_mb();
			n = min_t(size_t, size - used, vec[i].iov_len - done);
			off = s->tx_prod & (size - 1);
			first = min(n, size - off);
			memcpy(data + off, src + done, first);
			memcpy(data, src + done + first, n - first);
			/* The bytes are in before prod says so. */
			virt_wmb();
			s->tx_prod += n;
			puma_shm_set(&ix->prod, s->tx_prod);
			done += n;
		}
	}
	if (!more)
		puma_shm_kick(s);
	return 0;
}

static void puma_shm_shutdown(struct puma_peer *p)
{
	WRITE_ONCE(p->shm->shut, true);
	wake_up_all(&p->shm->wq);
}

/* Tell the peer at once: its next check sees epoch 0. */
static void puma_shm_release(struct puma_peer *p)
{
	struct puma_shm *s = p->shm;

	puma_shm_set(&s->hdr->slot[s->side].epoch, 0);
	puma_shm_kick(s);
}

static int puma_shm_error(struct puma_peer *p)
{
	return READ_ONCE(p->shm->bad) ? PUMA_ERR_SHM : PUMA_OK;
}

const struct puma_xport_ops puma_shm_ops = {
	.name = "shm",
	.connect = puma_shm_connect,
	.send = puma_shm_send,
	.recv = puma_shm_recv,
	.shutdown = puma_shm_shutdown,
	.release = puma_shm_release,
	.error = puma_shm_error,
	.persistent = true,
};

/* The peer using @s, if any; caller holds puma_peers_mutex. */
static struct puma_peer *puma_shm_user(struct puma_shm *s)
{
	struct puma_peer *p = NULL;
	unsigned long flags;
	int id;

	lockdep_assert_held(&puma_peers_mutex);
	spin_lock_irqsave(&puma_peers_lock, flags);
	for (id = 1; id <= PUMA_MAX_PEERS; id++)
		if (puma_peers[id] && puma_peers[id]->shm == s)
			p = puma_peers[id];
	spin_unlock_irqrestore(&puma_peers_lock, flags);
	return p;
}

/* Caller holds puma_shm_mutex. */
static struct puma_shm *puma_shm_find(const char *name)
{
	struct puma_shm *s;

	list_for_each_entry(s, &puma_shm_devs, node)
		if (!strcmp(pci_name(s->pdev), name))
			return s;
	return NULL;
}

static int puma_shm_add(bool lender, const char *spec)
{
	size_t n = strcspn(spec, "\n "), key_len;
	const char *key = skip_spaces(spec + n);
	struct puma_peer *p;
	struct puma_shm *s;
	char name[32];
	int ret;

	if (!n || n >= sizeof(name))
		return -EINVAL;
	memcpy(name, spec, n);
	name[n] = '\0';
	key_len = strlen(key);
	if (puma_key_parse(key, &key_len))
		return -EINVAL;	/* a pair on shm always has its own key */
	if (lender && !READ_ONCE(puma_cfg.lender))
		return -EPERM;
	if (!lender) {
		ret = puma_seal_ready();
		if (ret)
			return ret;
	}
	mutex_lock(&puma_peers_mutex);
	mutex_lock(&puma_shm_mutex);
	s = puma_shm_find(name);
	ret = -ENODEV;
	if (!s)
		goto out_unlock;
	ret = -EBUSY;
	if (puma_shm_user(s))
		goto out_unlock;
	ret = -ENOMEM;
	p = puma_peer_alloc(lender);
	if (!p)
		goto out_unlock;
	p->xops = &puma_shm_ops;
	p->shm = s;
	s->side = lender ? PUMA_SHM_LENDER : PUMA_SHM_BORROWER;
	memcpy(p->key, key, key_len);
	p->key_len = key_len;
	snprintf(p->name, sizeof(p->name), "shm:%s", name);
	ret = puma_peer_start(p, NULL);
	if (ret)
		puma_peer_put(p);
out_unlock:
	mutex_unlock(&puma_shm_mutex);
	mutex_unlock(&puma_peers_mutex);
	return ret;
}

static int puma_shm_del(const char *spec)
{
	struct puma_peer *p = NULL;
	struct puma_shm *s;
	char name[32];

	if (strscpy(name, spec, sizeof(name)) < 0)
		return -EINVAL;
	strim(name);
	mutex_lock(&puma_peers_mutex);
	mutex_lock(&puma_shm_mutex);
	s = puma_shm_find(name);
	if (s)
		p = puma_shm_user(s);
	if (p)
		puma_peer_stop(p);
	mutex_unlock(&puma_shm_mutex);
	mutex_unlock(&puma_peers_mutex);
	return p ? 0 : -ENOENT;
}

/**
 * puma_shm_ctl - the "shm" control file
 * @buf: "lend DEVICE KEY", "borrow DEVICE KEY" or "del DEVICE"; DEVICE
 *	 is the PCI name of an ivshmem-doorbell device puma.ko drives
 *
 * Return: 0 or -errno.
 */
int puma_shm_ctl(const char *buf)
{
	if (!strncmp(buf, "lend ", 5))
		return puma_shm_add(true, buf + 5);
	if (!strncmp(buf, "borrow ", 7))
		return puma_shm_add(false, buf + 7);
	if (!strncmp(buf, "del ", 4))
		return puma_shm_del(buf + 4);
	return -EINVAL;
}

/**
 * puma_shm_show - one line per ivshmem device, for sysfs
 * @buf: output
 * @size: its size
 *
 * Return: bytes written.
 */
ssize_t puma_shm_show(char *buf, size_t size)
{
	struct puma_shm *s;
	ssize_t n = 0;

	mutex_lock(&puma_shm_mutex);
	list_for_each_entry(s, &puma_shm_devs, node)
		n += scnprintf(buf + n, size - n,
			       "%s id=%u size=%zu ring=%u doorbells=%d\n",
			       pci_name(s->pdev),
			       readl(s->regs + PUMA_SHM_IVPOSITION),
			       s->mem_len, s->ring_size,
			       atomic_read(&s->irqs));
	mutex_unlock(&puma_shm_mutex);
	return n;
}

static int puma_shm_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct puma_shm *s;
	size_t ring;
	int ret;

	s = devm_kzalloc(&pdev->dev, sizeof(*s), GFP_KERNEL);
	if (!s)
		return -ENOMEM;
	s->pdev = pdev;
	init_waitqueue_head(&s->wq);
	ret = pcim_enable_device(pdev);
	if (ret)
		return ret;
	s->regs = pcim_iomap(pdev, 0, 0);
	if (!s->regs)
		return -ENOMEM;
	s->mem_len = pci_resource_len(pdev, 2);
	if (s->mem_len < PUMA_SHM_DATA + 2 * PUMA_SHM_RING_MIN) {
		dev_err(&pdev->dev, "shared memory too small: %zu bytes\n",
			s->mem_len);
		return -ENODEV;
	}
	ring = rounddown_pow_of_two((s->mem_len - PUMA_SHM_DATA) / 2);
	s->ring_size = min_t(size_t, ring, PUMA_SHM_RING_MAX);
	s->hdr = devm_memremap(&pdev->dev, pci_resource_start(pdev, 2),
			       s->mem_len, MEMREMAP_WB);
	if (IS_ERR(s->hdr))
		return PTR_ERR(s->hdr);
	/* An MSI-X doorbell is a write by the device: bus mastering. */
	pci_set_master(pdev);
	ret = pci_alloc_irq_vectors(pdev, 1, 1, PCI_IRQ_MSIX);
	if (ret < 0) {
		dev_err(&pdev->dev, "no MSI-X vector (ivshmem-doorbell with vectors >= 1 needed)\n");
		return ret;
	}
	ret = request_irq(pci_irq_vector(pdev, 0), puma_shm_irq, 0,
			  "puma-shm", s);
	if (ret) {
		pci_free_irq_vectors(pdev);
		return ret;
	}
	pci_set_drvdata(pdev, s);
	mutex_lock(&puma_shm_mutex);
	list_add_tail(&s->node, &puma_shm_devs);
	mutex_unlock(&puma_shm_mutex);
	dev_info(&pdev->dev, "ivshmem id %u, %zu bytes, rings of %u\n",
		 readl(s->regs + PUMA_SHM_IVPOSITION), s->mem_len,
		 s->ring_size);
	return 0;
}

static void puma_shm_remove(struct pci_dev *pdev)
{
	struct puma_shm *s = pci_get_drvdata(pdev);
	struct puma_peer *p;

	mutex_lock(&puma_peers_mutex);
	mutex_lock(&puma_shm_mutex);
	p = puma_shm_user(s);
	if (p)
		puma_peer_stop(p);
	list_del(&s->node);
	mutex_unlock(&puma_shm_mutex);
	mutex_unlock(&puma_peers_mutex);
	free_irq(pci_irq_vector(pdev, 0), s);
	pci_free_irq_vectors(pdev);
}

static const struct pci_device_id puma_shm_ids[] = {
	{ PCI_DEVICE(PCI_VENDOR_ID_REDHAT_QUMRANET, 0x1110) },
	{ }
};
MODULE_DEVICE_TABLE(pci, puma_shm_ids);

static struct pci_driver puma_shm_driver = {
	.name = "puma-shm",
	.id_table = puma_shm_ids,
	.probe = puma_shm_probe,
	.remove = puma_shm_remove,
};

int puma_shm_init(void)
{
	return pci_register_driver(&puma_shm_driver);
}

void puma_shm_exit(void)
{
	pci_unregister_driver(&puma_shm_driver);
}
