/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Puma guest module: declarations shared by its files.
 *
 *   main.c    life cycle, /sys/kernel/puma root
 *   control.c sysfs knobs and counters (read by pumactl)
 *   hooks.c   tracepoints and kprobes: put and invalidation events
 *   get.c     the read-path replacements (ftrace redirect): gets
 *   index.c   borrower-side record of remote copies (never-stale index)
 *   peer.c    TCP connections, handshake, ordered send queue
 *   addr.c    peer addresses: IPv4, IPv6 with a link-local scope
 *   store.c   lender-side store of hosted pages, with a shrinker
 *   seal.c    borrower's AEAD of each page it lends (key never sent)
 *   policy.c  RTT guard, sequential filter, lender activity detection
 *   proto.c   wire format checks (shared with the user-space fuzzer)
 */
#ifndef PUMA_H
#define PUMA_H

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/fs.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/kobject.h>
#include <linux/list.h>
#include <linux/net.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/workqueue.h>

#include "proto.h"

#define PUMA_VERSION "0.2"
#define PUMA_MAX_PEERS 31
#define PUMA_MAX_BKEYS 32	/* borrowers with their own key, on a lender */

/* Counters: one per event and one per reason to refuse work. */
enum puma_stat {
	PUMA_STAT_PUTS,			/* pages queued to a lender */
	PUMA_STAT_PUTS_SKIPPED_CLEAN,	/* already at the lender, unchanged */
	PUMA_STAT_PUTS_LARGE,		/* puts of pages of large folios */
	PUMA_STAT_GETS,			/* pages asked for */
	PUMA_STAT_HITS,
	PUMA_STAT_HITS_LARGE,		/* hits filling large folios */
	PUMA_STAT_MISSES,
	PUMA_STAT_MISSES_FORGOTTEN,	/* entries dropped: lender had none */
	PUMA_STAT_GET_TIMEOUTS,
	PUMA_STAT_GET_STALE,		/* answer dropped: file changed */
	PUMA_STAT_GETS_SKIPPED_RTT,
	PUMA_STAT_INVAL_EVENTS,
	PUMA_STAT_INVAL_PAGES,		/* remote copies forgotten */
	PUMA_STAT_COOKIE_CHANGES,	/* files changed since their puts */
	PUMA_STAT_BYTES_TX,
	PUMA_STAT_BYTES_RX,
	PUMA_STAT_DROP_NO_BUFFER,
	PUMA_STAT_DROP_NO_PEER,
	PUMA_STAT_DROP_SUSPENDED,
	PUMA_STAT_DROP_SEQUENTIAL,
	PUMA_STAT_DROP_TRUNCATING,
	PUMA_STAT_DROP_WRITING,		/* a writer held the file's i_rwsem */
	PUMA_STAT_DROP_NOMEM,
	PUMA_STAT_DROP_QUEUE_FULL,
	PUMA_STAT_LEND_PUTS,		/* lender: pages stored */
	PUMA_STAT_LEND_GETS,
	PUMA_STAT_LEND_HITS,
	PUMA_STAT_LEND_DROP_CAPACITY,
	PUMA_STAT_LEND_DROP_NOMEM,
	PUMA_STAT_LEND_DROP_SUSPENDED,
	PUMA_STAT_LEND_SHRUNK,		/* pages given back to reclaim */
	PUMA_STAT_LEND_SUSPENDS,	/* activity detector fired */
	PUMA_STAT_DISCONNECTS,
	PUMA_STAT_PINGS,		/* heartbeats sent to lenders */
	PUMA_STAT_AUTH_FAILURES,	/* lender blobs that failed the tag */
	PUMA_STAT_SEALS,		/* pages sealed for a put */
	PUMA_STAT_SEAL_NS,		/* ... and the time it took */
	PUMA_STAT_OPENS,		/* blobs checked and decrypted */
	PUMA_STAT_OPEN_NS,
	PUMA_STAT_NR,
};

extern atomic64_t puma_stats[PUMA_STAT_NR];
extern atomic64_t puma_disconnect_reasons[PUMA_REASON_MAX];
extern const char *const puma_stat_names[PUMA_STAT_NR];

static inline void puma_count(enum puma_stat s)
{
	atomic64_inc(&puma_stats[s]);
}

static inline void puma_count_n(enum puma_stat s, long n)
{
	atomic64_add(n, &puma_stats[s]);
}

/* Tunables (control.c); read without locks, written by sysfs. */
struct puma_config {
	bool borrower;		/* put and get */
	bool lender;		/* listen and host */
	bool exclusive;		/* a get removes the lender's copy */
	bool seq_filter;	/* sequential reads are not put */
	unsigned int rtt_guard_us;	/* 0: off */
	unsigned int get_timeout_us;
	unsigned long capacity_pages;	/* per borrower, on a lender */
	unsigned int act_threshold;	/* activations per period */
	unsigned int quiet_ms;		/* quiet time before lending again */
	unsigned int heartbeat_ms;	/* borrower: PING a quiet lender */
	unsigned int peer_timeout_ms;	/* close a silent peer; 0: never */
	u16 port;
	u8 key[64];
	unsigned int key_len;
};

extern struct puma_config puma_cfg;
extern struct kobject *puma_kobj;

/* A peer's address (addr.c); sa.sa_family 0: none. */
union puma_addr {
	struct sockaddr sa;
	struct sockaddr_in v4;
	struct sockaddr_in6 v6;
};

int puma_addr_parse(const char *s, bool port, union puma_addr *a);
void puma_addr_normalize(union puma_addr *a);
bool puma_addr_equal(const union puma_addr *a, const union puma_addr *b,
		     bool port);
int puma_addr_len(const union puma_addr *a);
int puma_addr_print(char *buf, size_t size, const union puma_addr *a,
		    bool port);

/* control.c */
int puma_control_init(void);
void puma_control_exit(void);
unsigned int puma_key_copy(u8 *buf);
unsigned int puma_borrower_key_copy(const union puma_addr *addr, u8 *buf);
int puma_key_parse(const char *s, size_t *len);

/* A file identity in the borrower index (host endian). */
struct puma_fkey {
	u64 pool;
	u64 ino;
	u32 gen;
};

/* seal.c */
/* Versions puma_seal_version() gives: index entries store them too. */
#define PUMA_SEAL_VERSION_BITS	54
struct puma_seal_ctx;
int puma_seal_ready(void);
void puma_seal_exit(void);
u64 puma_seal_version(void);
struct puma_seal_ctx *puma_seal_ctx_alloc(gfp_t gfp);
void puma_seal_ctx_free(struct puma_seal_ctx *c);
int puma_seal_page(struct puma_seal_ctx *c, const struct puma_key *k,
		   u64 version, u8 *blob);
bool puma_open_page(struct puma_seal_ctx *c, const struct puma_fkey *fk,
		    pgoff_t index, u64 version, struct page *page,
		    const u8 *tag);

/* peer.c */
struct puma_peer;

struct puma_get_req {
	struct list_head node;	/* peer->gets, under peer->lock */
	u64 id;
	unsigned int count;
	struct puma_fkey fkey;
	pgoff_t index[PUMA_BATCH_MAX];
	u64 version[PUMA_BATCH_MAX];	/* of the puts the index records */
	struct page *page[PUMA_BATCH_MAX];	/* of locked folios */
	u32 hits;		/* pages holding a lender's ciphertext */
	u8 tag[PUMA_BATCH_MAX][PUMA_SEAL_TAG_LEN];	/* that came with it */
	struct puma_seal_ctx *seal;	/* to open them, in the reader */
	int error;
	struct completion done;
};

int puma_peer_init(void);
void puma_peer_exit(void);
int puma_peer_add(const char *spec);
int puma_peer_del(const char *spec);
void puma_peer_stop_side(bool lender_side);
ssize_t puma_peer_show(char *buf, size_t size);
int puma_shm_ctl(const char *buf);
ssize_t puma_shm_show(char *buf, size_t size);
int puma_listen_set(bool on);
int puma_peer_pick(void);
bool puma_peer_ready(int id);
int puma_peer_queue_put(int id, const struct puma_fkey *fk, pgoff_t index,
			u64 version, const void *data);
void puma_peer_queue_inval(int id, const struct puma_fkey *fk, u32 kind,
			   pgoff_t start, pgoff_t end);
int puma_peer_get(int id, struct puma_get_req *req);
void puma_peer_broadcast(u16 type);
unsigned int puma_put_buffers_free(void);

/* readpath.c */
int puma_readpath_check(unsigned long read_pages,
			unsigned long filemap_read_folio);
ssize_t puma_readpath_show(char *buf);

/* index.c */
int puma_index_init(void);
void puma_index_exit(void);
void puma_index_assert_locked(void);
bool puma_inode_eligible(struct inode *inode);
void puma_index_put_page(struct inode *inode, struct address_space *mapping,
			 pgoff_t index, const void *data, bool large);
void puma_index_evicted(struct inode *inode, pgoff_t start, unsigned long nr);
int puma_index_lookup(struct inode *inode, pgoff_t index,
		      struct puma_fkey *fk, unsigned long *seq, u64 *version);
bool puma_index_still_valid(struct inode *inode, pgoff_t index,
			    const struct puma_fkey *fk, unsigned long seq);
void puma_index_forget(struct inode *inode, pgoff_t index);
void puma_index_forget_missed(struct inode *inode, pgoff_t index, int peer);
void puma_index_forget_bad(struct inode *inode, pgoff_t index, int peer);
void puma_index_inval(struct inode *inode, pgoff_t start, pgoff_t end);
void puma_index_mark_sequential(struct inode *inode, pgoff_t start,
				unsigned long nr);
void puma_index_count_gets(struct inode *inode, unsigned int hits,
			   unsigned int misses, unsigned int stale);
ssize_t puma_index_fs_show(char *buf);
void puma_index_drop_sb(struct super_block *sb);
void puma_index_drop_peer(int peer);
void puma_index_drop_all(void);
void puma_index_puts_off(void);
void puma_truncate_begin(struct address_space *mapping);
void puma_truncate_end(struct address_space *mapping);
unsigned long puma_index_pages(void);
unsigned long puma_index_markers(void);

/* hooks.c */
int puma_hooks_init(void);
void puma_hooks_exit(void);

/* get.c */
int puma_get_init(void);
void puma_get_exit(void);

/* store.c */
struct puma_sess;
int puma_store_init(void);
void puma_store_exit(void);
struct puma_sess *puma_store_sess_new(void);
void puma_store_sess_free(struct puma_sess *s);
int puma_store_put(struct puma_sess *s, const struct puma_key *k,
		   const void *blob);
bool puma_store_get(struct puma_sess *s, const struct puma_key *k, void *dst,
		    bool exclusive);
void puma_store_inval(struct puma_sess *s, const struct puma_inval *inv);
void puma_store_drop_all(void);
unsigned long puma_store_hosted(void);
unsigned long puma_store_max_chain(void);

/* policy.c */
int puma_policy_init(void);
void puma_policy_exit(void);
bool puma_rtt_allows_get(void);
void puma_rtt_sample(u64 ns);
u64 puma_rtt_ewma_ns(void);
bool puma_lender_suspended(void);

#endif /* PUMA_H */
