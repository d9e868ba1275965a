// SPDX-License-Identifier: GPL-2.0
/*
 * Control: knobs and counters under /sys/kernel/puma (see docs/puma.md;
 * pumactl is a thin shell wrapper around these files).
 *
 *   role            off | borrower | lender | both; a role given up ends
 *                   its connections (lenders are removed, as by "del");
 *                   borrowing fails without AES-GCM (seal.c)
 *   key             default secret for the handshake (write only)
 *   borrower_keys   lender: the key of each borrower, by its address
 *                   (IPv4, or IPv6 with a link-local scope: addr.c);
 *                   write "add ADDR KEY" or "del ADDR", read: the addresses
 *   port            TCP port a lender listens on (set before the role)
 *   peers           read: one line per connection;
 *                   write: "add IP:PORT [KEY]" or "del IP:PORT"
 *                   (lenders; KEY: the pair's own key, else "key")
 *   shm             read: the ivshmem devices puma.ko drives; write
 *                   "lend DEV KEY", "borrow DEV KEY" or "del DEV" (a
 *                   same-host pair over shared memory, shm.c)
 *   mode            noninclusive | exclusive
 *   seq_filter      1: pages read sequentially are not put
 *   rtt_guard_us    skip gets while their average latency is above (0: off)
 *   get_timeout_us  give up on a get after this long
 *   capacity_pages  pages a lender hosts per borrower at most
 *   act_threshold   activations per half second that make a lender busy
 *   quiet_ms        quiet time before a busy lender lends again
 *   heartbeat_ms    borrower: PING a lender heard nothing from for this long
 *                   (0: never; heartbeat.c)
 *   peer_timeout_ms close a connection whose peer said nothing for this
 *                   long (0: never); a few heartbeats
 *   stats           "name value" lines: counters, gauges, drops by reason
 *   fs_stats        one line per file system: s_id MAJOR:MINOR name=value...
 *                   (its share of puts, gets, hits...; see index.c)
 *
 * Implementation: puma_cfg holds the values; puma_ctl_mutex serialises
 * writers; readers of single fields use READ_ONCE.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/inet.h>
#include <linux/kobject.h>
#include <linux/mutex.h>
#include <linux/string.h>
#include <linux/sysfs.h>

#include "puma.h"

struct puma_config puma_cfg = {
	.seq_filter = true,
	.rtt_guard_us = 50000,
	.get_timeout_us = 200000,
	.capacity_pages = 262144,
	.act_threshold = 256,
	.quiet_ms = 3000,
	.heartbeat_ms = 5000,
	.peer_timeout_ms = 30000,
	.port = 7400,
};

atomic64_t puma_stats[PUMA_STAT_NR];
atomic64_t puma_disconnect_reasons[PUMA_REASON_MAX];

const char *const puma_stat_names[PUMA_STAT_NR] = {
	[PUMA_STAT_PUTS] = "puts",
	[PUMA_STAT_PUTS_SKIPPED_CLEAN] = "puts_skipped_clean",
	[PUMA_STAT_PUTS_LARGE] = "puts_large",
	[PUMA_STAT_GETS] = "gets",
	[PUMA_STAT_HITS] = "hits",
	[PUMA_STAT_HITS_LARGE] = "hits_large",
	[PUMA_STAT_MISSES] = "misses",
	[PUMA_STAT_MISSES_FORGOTTEN] = "misses_forgotten",
	[PUMA_STAT_GET_TIMEOUTS] = "get_timeouts",
	[PUMA_STAT_GET_STALE] = "get_stale_dropped",
	[PUMA_STAT_GETS_SKIPPED_RTT] = "gets_skipped_rtt",
	[PUMA_STAT_INVAL_EVENTS] = "invalidations",
	[PUMA_STAT_INVAL_PAGES] = "invalidated_pages",
	[PUMA_STAT_COOKIE_CHANGES] = "cookie_changes",
	[PUMA_STAT_BYTES_TX] = "bytes_tx",
	[PUMA_STAT_BYTES_RX] = "bytes_rx",
	[PUMA_STAT_DROP_NO_BUFFER] = "drop_no_buffer",
	[PUMA_STAT_DROP_NO_PEER] = "drop_no_peer",
	[PUMA_STAT_DROP_SUSPENDED] = "drop_suspended",
	[PUMA_STAT_DROP_SEQUENTIAL] = "drop_sequential",
	[PUMA_STAT_DROP_TRUNCATING] = "drop_truncating",
	[PUMA_STAT_DROP_WRITING] = "drop_writing",
	[PUMA_STAT_DROP_NOMEM] = "drop_nomem",
	[PUMA_STAT_DROP_QUEUE_FULL] = "drop_queue_full",
	[PUMA_STAT_LEND_PUTS] = "lend_puts",
	[PUMA_STAT_LEND_GETS] = "lend_gets",
	[PUMA_STAT_LEND_HITS] = "lend_hits",
	[PUMA_STAT_LEND_DROP_CAPACITY] = "lend_drop_capacity",
	[PUMA_STAT_LEND_DROP_NOMEM] = "lend_drop_nomem",
	[PUMA_STAT_LEND_DROP_SUSPENDED] = "lend_drop_suspended",
	[PUMA_STAT_LEND_SHRUNK] = "lend_shrunk",
	[PUMA_STAT_LEND_SUSPENDS] = "lend_suspends",
	[PUMA_STAT_DISCONNECTS] = "disconnects",
	[PUMA_STAT_PINGS] = "pings",
	[PUMA_STAT_AUTH_FAILURES] = "auth_failures",
	[PUMA_STAT_SEALS] = "seals",
	[PUMA_STAT_SEAL_NS] = "seal_ns",
	[PUMA_STAT_OPENS] = "opens",
	[PUMA_STAT_OPEN_NS] = "open_ns",
};

static DEFINE_MUTEX(puma_ctl_mutex);
static DEFINE_SPINLOCK(puma_key_lock);

/* Lender: the keys of given borrowers, by address; under puma_key_lock. */
struct puma_bkey {
	union puma_addr addr;	/* family 0: free slot */
	unsigned int len;
	u8 key[sizeof(puma_cfg.key)];
};

static struct puma_bkey puma_bkeys[PUMA_MAX_BKEYS];

/**
 * puma_key_copy - the default key, for a handshake
 * @buf: sizeof(puma_cfg.key) bytes
 *
 * Return: the key length, 0 if no key is set.
 */
unsigned int puma_key_copy(u8 *buf)
{
	unsigned int len;

	spin_lock(&puma_key_lock);
	len = puma_cfg.key_len;
	memcpy(buf, puma_cfg.key, len);
	spin_unlock(&puma_key_lock);
	return len;
}

/**
 * puma_borrower_key_copy - the key of the borrower at @addr, for a handshake
 * @addr: the borrower's address (its port is not looked at)
 * @buf: sizeof(puma_cfg.key) bytes
 *
 * Return: the key length: its own key if one was given ("borrower_keys"),
 * else the default key; 0 if neither is set.
 */
unsigned int puma_borrower_key_copy(const union puma_addr *addr, u8 *buf)
{
	unsigned int i, len = 0;

	spin_lock(&puma_key_lock);
	for (i = 0; i < PUMA_MAX_BKEYS; i++) {
		if (puma_bkeys[i].addr.sa.sa_family &&
		    puma_addr_equal(&puma_bkeys[i].addr, addr, false)) {
			len = puma_bkeys[i].len;
			memcpy(buf, puma_bkeys[i].key, len);
			break;
		}
	}
	if (!len) {
		len = puma_cfg.key_len;
		memcpy(buf, puma_cfg.key, len);
	}
	spin_unlock(&puma_key_lock);
	return len;
}

/**
 * puma_key_parse - check a key given in a control file
 * @s: the key, up to the end of the line
 * @len: its length, the trailing newline taken off
 *
 * Return: 0 if it is 8 to 64 bytes long, else -EINVAL.
 */
int puma_key_parse(const char *s, size_t *len)
{
	if (*len && s[*len - 1] == '\n')
		(*len)--;
	return *len < 8 || *len > sizeof(puma_cfg.key) ? -EINVAL : 0;
}

static ssize_t role_show(struct kobject *kobj, struct kobj_attribute *attr,
			 char *buf)
{
	static const char *const roles[] = { "off", "borrower", "lender",
					     "both" };

	return sysfs_emit(buf, "%s\n",
			  roles[puma_cfg.borrower | puma_cfg.lender << 1]);
}

static ssize_t role_store(struct kobject *kobj, struct kobj_attribute *attr,
			  const char *buf, size_t count)
{
	bool borrower, lender;
	int ret;

	if (sysfs_streq(buf, "off")) {
		borrower = false;
		lender = false;
	} else if (sysfs_streq(buf, "borrower")) {
		borrower = true;
		lender = false;
	} else if (sysfs_streq(buf, "lender")) {
		borrower = false;
		lender = true;
	} else if (sysfs_streq(buf, "both")) {
		borrower = true;
		lender = true;
	} else {
		return -EINVAL;
	}
	mutex_lock(&puma_ctl_mutex);
	/* A borrower seals what it puts: no key, no borrowing. */
	ret = borrower ? puma_seal_ready() : 0;
	if (!ret)
		ret = puma_listen_set(lender);
	if (!ret) {
		WRITE_ONCE(puma_cfg.borrower, borrower);
		WRITE_ONCE(puma_cfg.lender, lender);
		/*
		 * A role given up ends its sessions: the borrowers connected
		 * here lose their pages, the lenders we borrow from are
		 * removed (peer del) and the index forgets their pages.
		 */
		if (!lender) {
			puma_peer_stop_side(true);
			puma_store_drop_all();
		}
		if (!borrower)
			puma_peer_stop_side(false);
	}
	mutex_unlock(&puma_ctl_mutex);
	return ret ? ret : count;
}

static ssize_t key_show(struct kobject *kobj, struct kobj_attribute *attr,
			char *buf)
{
	return sysfs_emit(buf, "%s\n", puma_cfg.key_len ? "set" : "unset");
}

static ssize_t key_store(struct kobject *kobj, struct kobj_attribute *attr,
			 const char *buf, size_t count)
{
	size_t len = count;

	if (puma_key_parse(buf, &len))
		return -EINVAL;
	spin_lock(&puma_key_lock);
	memcpy(puma_cfg.key, buf, len);
	puma_cfg.key_len = len;
	spin_unlock(&puma_key_lock);
	return count;
}

static ssize_t borrower_keys_show(struct kobject *kobj,
				  struct kobj_attribute *attr, char *buf)
{
	ssize_t n = 0;
	unsigned int i;

	spin_lock(&puma_key_lock);
	for (i = 0; i < PUMA_MAX_BKEYS; i++)
		if (puma_bkeys[i].addr.sa.sa_family) {
			n += puma_addr_print(buf + n, PAGE_SIZE - n,
					     &puma_bkeys[i].addr, false);
			n += scnprintf(buf + n, PAGE_SIZE - n, "\n");
		}
	spin_unlock(&puma_key_lock);
	return n;
}

/* "add ADDR KEY" (replaces ADDR's key) or "del ADDR". */
static ssize_t borrower_keys_store(struct kobject *kobj,
				   struct kobj_attribute *attr,
				   const char *buf, size_t count)
{
	struct puma_bkey *slot = NULL;
	char line[128], *ip, *key = NULL;
	union puma_addr addr;
	size_t len = 0;
	unsigned int i;
	bool add;
	int ret;

	if (count >= sizeof(line))
		return -EINVAL;
	memcpy(line, buf, count);
	line[count] = '\0';
	if (count && line[count - 1] == '\n')
		line[count - 1] = '\0';
	if (!strncmp(line, "add ", 4))
		add = true;
	else if (!strncmp(line, "del ", 4))
		add = false;
	else
		return -EINVAL;
	ip = skip_spaces(line + 4);
	if (add) {
		key = strchr(ip, ' ');
		if (!key)
			return -EINVAL;
		*key = '\0';
		key = skip_spaces(key + 1);
		len = strlen(key);
		if (puma_key_parse(key, &len))
			return -EINVAL;
	}
	ret = puma_addr_parse(strim(ip), false, &addr);
	if (ret) {
		memzero_explicit(line, sizeof(line));
		return ret;
	}
	spin_lock(&puma_key_lock);
	for (i = 0; i < PUMA_MAX_BKEYS; i++) {
		if (puma_bkeys[i].addr.sa.sa_family &&
		    puma_addr_equal(&puma_bkeys[i].addr, &addr, false)) {
			slot = &puma_bkeys[i];
			break;
		}
		if (!puma_bkeys[i].addr.sa.sa_family && !slot && add)
			slot = &puma_bkeys[i];
	}
	if (slot && add) {
		slot->addr = addr;
		memcpy(slot->key, key, len);
		slot->len = len;
	} else if (slot) {
		memzero_explicit(slot, sizeof(*slot));
	}
	spin_unlock(&puma_key_lock);
	memzero_explicit(line, sizeof(line));
	if (!slot)
		return add ? -ENOSPC : -ENOENT;
	return count;
}

static ssize_t peers_show(struct kobject *kobj, struct kobj_attribute *attr,
			  char *buf)
{
	return puma_peer_show(buf, PAGE_SIZE);
}

static ssize_t peers_store(struct kobject *kobj, struct kobj_attribute *attr,
			   const char *buf, size_t count)
{
	int ret;

	if (!strncmp(buf, "add ", 4))
		ret = puma_peer_add(buf + 4);
	else if (!strncmp(buf, "del ", 4))
		ret = puma_peer_del(buf + 4);
	else
		ret = -EINVAL;
	return ret ? ret : count;
}

static ssize_t shm_show(struct kobject *kobj, struct kobj_attribute *attr,
			char *buf)
{
	return puma_shm_show(buf, PAGE_SIZE);
}

static ssize_t shm_store(struct kobject *kobj, struct kobj_attribute *attr,
			 const char *buf, size_t count)
{
	int ret = puma_shm_ctl(buf);

	return ret ? ret : count;
}

static ssize_t mode_show(struct kobject *kobj, struct kobj_attribute *attr,
			 char *buf)
{
	return sysfs_emit(buf, "%s\n",
			  puma_cfg.exclusive ? "exclusive" : "noninclusive");
}

static ssize_t mode_store(struct kobject *kobj, struct kobj_attribute *attr,
			  const char *buf, size_t count)
{
	if (sysfs_streq(buf, "exclusive"))
		WRITE_ONCE(puma_cfg.exclusive, true);
	else if (sysfs_streq(buf, "noninclusive"))
		WRITE_ONCE(puma_cfg.exclusive, false);
	else
		return -EINVAL;
	return count;
}

static ssize_t seq_filter_show(struct kobject *kobj,
			       struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n", puma_cfg.seq_filter);
}

static ssize_t seq_filter_store(struct kobject *kobj,
				struct kobj_attribute *attr, const char *buf,
				size_t count)
{
	bool v;

	if (kstrtobool(buf, &v))
		return -EINVAL;
	WRITE_ONCE(puma_cfg.seq_filter, v);
	return count;
}

static ssize_t port_show(struct kobject *kobj, struct kobj_attribute *attr,
			 char *buf)
{
	return sysfs_emit(buf, "%u\n", puma_cfg.port);
}

static ssize_t port_store(struct kobject *kobj, struct kobj_attribute *attr,
			  const char *buf, size_t count)
{
	u16 v;

	if (kstrtou16(buf, 10, &v) || !v)
		return -EINVAL;
	WRITE_ONCE(puma_cfg.port, v);
	return count;
}

#define PUMA_UINT_ATTR(field, min, max)					\
static ssize_t field##_show(struct kobject *kobj,			\
			    struct kobj_attribute *attr, char *buf)	\
{									\
	return sysfs_emit(buf, "%lu\n",					\
			  (unsigned long)READ_ONCE(puma_cfg.field));	\
}									\
static ssize_t field##_store(struct kobject *kobj,			\
			     struct kobj_attribute *attr,		\
			     const char *buf, size_t count)		\
{									\
	unsigned long v;						\
									\
	if (kstrtoul(buf, 10, &v) || v < (min) || v > (max))		\
		return -EINVAL;						\
	WRITE_ONCE(puma_cfg.field, v);					\
	return count;							\
}									\
static struct kobj_attribute field##_attr = __ATTR_RW(field)

PUMA_UINT_ATTR(rtt_guard_us, 0, 10000000);
PUMA_UINT_ATTR(get_timeout_us, 1000, 10000000);
PUMA_UINT_ATTR(capacity_pages, 0, ULONG_MAX);
PUMA_UINT_ATTR(act_threshold, 0, UINT_MAX);
PUMA_UINT_ATTR(quiet_ms, 0, 3600000);
PUMA_UINT_ATTR(heartbeat_ms, 0, 3600000);
PUMA_UINT_ATTR(peer_timeout_ms, 0, 3600000);

static ssize_t stats_show(struct kobject *kobj, struct kobj_attribute *attr,
			  char *buf)
{
	ssize_t n = 0;
	int i;

	for (i = 0; i < PUMA_STAT_NR; i++)
		n += sysfs_emit_at(buf, n, "%s %lld\n", puma_stat_names[i],
				   atomic64_read(&puma_stats[i]));
	for (i = 1; i < PUMA_REASON_MAX; i++) {
		char name[48];
		char *s;

		strscpy(name, puma_reason_str(i), sizeof(name));
		for (s = name; *s; s++)
			if (*s == ' ' || *s == '-')
				*s = '_';
		n += sysfs_emit_at(buf, n, "disconnect_%s %lld\n", name,
				   atomic64_read(&puma_disconnect_reasons[i]));
	}
	n += sysfs_emit_at(buf, n, "rtt_us %llu\n", puma_rtt_ewma_ns() / 1000);
	n += sysfs_emit_at(buf, n, "remote_pages %lu\n", puma_index_pages());
	n += sysfs_emit_at(buf, n, "sequential_marks %lu\n",
			   puma_index_markers());
	n += sysfs_emit_at(buf, n, "hosted_pages %lu\n", puma_store_hosted());
	n += sysfs_emit_at(buf, n, "lend_max_chain %lu\n",
			   puma_store_max_chain());
	n += sysfs_emit_at(buf, n, "put_buffers_free %u\n",
			   puma_put_buffers_free());
	n += sysfs_emit_at(buf, n, "lender_busy %d\n",
			   puma_lender_suspended());
	return n;
}

static ssize_t fs_stats_show(struct kobject *kobj,
			     struct kobj_attribute *attr, char *buf)
{
	return puma_index_fs_show(buf);
}

static struct kobj_attribute role_attr = __ATTR_RW(role);
static struct kobj_attribute key_attr = __ATTR(key, 0600, key_show,
					       key_store);
static struct kobj_attribute borrower_keys_attr =
	__ATTR(borrower_keys, 0600, borrower_keys_show, borrower_keys_store);
static struct kobj_attribute peers_attr = __ATTR_RW(peers);
/* 0600: what is written holds a key. */
static struct kobj_attribute shm_attr = __ATTR(shm, 0600, shm_show,
					       shm_store);
static struct kobj_attribute mode_attr = __ATTR_RW(mode);
static struct kobj_attribute seq_filter_attr = __ATTR_RW(seq_filter);
static struct kobj_attribute port_attr = __ATTR_RW(port);
static struct kobj_attribute stats_attr = __ATTR_RO(stats);
static struct kobj_attribute fs_stats_attr = __ATTR_RO(fs_stats);

static struct attribute *puma_ctl_attrs[] = {
	&role_attr.attr,
	&key_attr.attr,
	&borrower_keys_attr.attr,
	&peers_attr.attr,
	&shm_attr.attr,
	&mode_attr.attr,
	&seq_filter_attr.attr,
	&port_attr.attr,
	&rtt_guard_us_attr.attr,
	&get_timeout_us_attr.attr,
	&capacity_pages_attr.attr,
	&act_threshold_attr.attr,
	&quiet_ms_attr.attr,
	&heartbeat_ms_attr.attr,
	&peer_timeout_ms_attr.attr,
	&stats_attr.attr,
	&fs_stats_attr.attr,
	NULL,
};

static const struct attribute_group puma_ctl_group = {
	.attrs = puma_ctl_attrs,
};

int puma_control_init(void)
{
	return sysfs_create_group(puma_kobj, &puma_ctl_group);
}

void puma_control_exit(void)
{
	sysfs_remove_group(puma_kobj, &puma_ctl_group);
	mutex_lock(&puma_ctl_mutex);
	WRITE_ONCE(puma_cfg.borrower, false);
	WRITE_ONCE(puma_cfg.lender, false);
	mutex_unlock(&puma_ctl_mutex);
	spin_lock(&puma_key_lock);
	memzero_explicit(puma_cfg.key, sizeof(puma_cfg.key));
	puma_cfg.key_len = 0;
	memzero_explicit(puma_bkeys, sizeof(puma_bkeys));
	spin_unlock(&puma_key_lock);
}
