// SPDX-License-Identifier: GPL-2.0
/*
 * Borrower-side index of remote copies: the never-stale rule.
 *
 * A lender holds copies of pages the borrower evicted.  Serving one after
 * the file changed would be silent data corruption, so the borrower never
 * trusts the lender to know what is current.  It keeps its own record of
 * which page of which file was put to which lender, and it only ever asks
 * for pages in that record.  Every event that can change a file's content
 * (dirtying, truncate and hole punch, direct I/O write, eviction of the
 * inode, unmount, loss of the lender) removes the affected records
 * synchronously, in the hook, before the event proceeds; the lender is told
 * afterwards, on the same ordered connection as the puts.  A put of a page
 * replaces, or on failure deletes, the lender's copy under the same key, so
 * a lender copy is always the content of the latest recorded put, or
 * nothing.  docs/puma-never-stale.md gives the whole argument.
 *
 * Keys: a pool is one mounted superblock and gets a random 64-bit epoch
 * when first seen, dropped at unmount, so a re-mount (or a file system
 * changed offline in between) never matches old copies.  Within a pool a
 * file is (inode number, i_generation); a page is (file, index).
 *
 * Implementation: puma_pools lists the pools, puma_files hashes the per-file
 * records; each record's xarray maps a page index to a value entry holding
 * the lender id and the version its put was sealed under (seal.c: a get
 * accepts only the blob of that very put), or PUMA_E_SEQ, "read
 * sequentially: do not put".  seq
 * counts the invalidations of the file, so a get in flight can tell that
 * the file changed while it waited.  puma_truncs lists the mappings being
 * truncated: no put is taken for them until the truncate returned.  A pool
 * also keeps its file system's share of the counters (fs_stats); it lives
 * from the first put or mark until unmount, so there is one per mounted
 * file system at most.
 *
 * Change cookie: a file's record also keeps what the kernel itself
 * updates on any change of the file's data (i_version, which reading it
 * here arms to move on the next change; mtime, ctime, size), as read at
 * its first put or the last time it was found moved.  It is checked at every put, lookup
 * and use of an answer: if it moved, the file changed, maybe without any
 * hook seeing it (ext4's inline data writes clear the folio's dirty flag
 * themselves, so writeback_dirty_folio never fires for them), and every
 * entry of the file is forgotten.  A change the hooks saw costs the
 * file's other remote pages too: safe, not free.
 *
 * Locking: puma_index_lock (irqsave: the put and dirty hooks run with
 * interrupts off under the mapping's i_pages lock) protects all of the
 * above.  Lock order: i_pages lock -> puma_index_lock -> peer->lock.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fs.h>
#include <linux/hash.h>
#include <linux/hashtable.h>
#include <linux/iversion.h>
#include <linux/magic.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/xarray.h>

#include "compat.h"
#include "puma.h"

#define PUMA_E_PEER_MASK	0xff
#define PUMA_E_SEQ		0x100
#define PUMA_E_VER_SHIFT	9	/* PUMA_SEAL_VERSION_BITS above */

static u64 puma_entry_version(unsigned long v)
{
	return v >> PUMA_E_VER_SHIFT;
}

/*
 * The counters a pool keeps for its file system: its share of the global
 * counter puma_fs_stat_global[] names, under the same name.
 */
enum puma_fs_stat {
	PUMA_FS_PUTS,
	PUMA_FS_PUTS_SKIPPED_CLEAN,
	PUMA_FS_GETS,
	PUMA_FS_HITS,
	PUMA_FS_MISSES,
	PUMA_FS_GET_STALE,
	PUMA_FS_INVAL_PAGES,
	PUMA_FS_NR,
};

static const enum puma_stat puma_fs_stat_global[PUMA_FS_NR] = {
	[PUMA_FS_PUTS] = PUMA_STAT_PUTS,
	[PUMA_FS_PUTS_SKIPPED_CLEAN] = PUMA_STAT_PUTS_SKIPPED_CLEAN,
	[PUMA_FS_GETS] = PUMA_STAT_GETS,
	[PUMA_FS_HITS] = PUMA_STAT_HITS,
	[PUMA_FS_MISSES] = PUMA_STAT_MISSES,
	[PUMA_FS_GET_STALE] = PUMA_STAT_GET_STALE,
	[PUMA_FS_INVAL_PAGES] = PUMA_STAT_INVAL_PAGES,
};

struct puma_pool {
	struct list_head node;
	struct super_block *sb;
	u64 epoch;
	dev_t dev;		/* sb->s_dev and s_id, for fs_stats */
	char id[sizeof_field(struct super_block, s_id)];
	unsigned long remote;	/* entries of its files naming a lender */
	u64 stats[PUMA_FS_NR];
};

/* What moves when a file's data changes, hooks or not. */
struct puma_cookie {
	u64 version;		/* i_version */
	struct timespec64 mtime;
	struct timespec64 ctime;
	loff_t size;
};

struct puma_file {
	struct hlist_node hnode;
	struct puma_pool *pool;
	u64 ino;
	u32 gen;
	u32 peers;		/* lenders that got puts of this file */
	unsigned long seq;	/* invalidations so far */
	struct puma_cookie cookie;	/* when the remote entries were made */
	unsigned long nr;	/* entries in pages, markers included */
	unsigned long remote;	/* entries naming a lender */
	struct xarray pages;
};

struct puma_trunc {
	struct hlist_node hnode;
	struct address_space *mapping;
	unsigned int count;
};

/*
 * Taken with interrupts off, often in reclaim (a put happens when the
 * page cache evicts a page): allocations under it are GFP_NOWAIT, which
 * never sleeps and, unlike GFP_ATOMIC, never draws on the reserves kept
 * for interrupts and reclaim.  A failed one costs a put or a mark,
 * never a stale page: the entry that would have named a lender is not
 * made.
 */
static DEFINE_SPINLOCK(puma_index_lock);
static LIST_HEAD(puma_pools);
static DEFINE_HASHTABLE(puma_files, 12);
static DEFINE_HASHTABLE(puma_truncs, 6);
/* Truncations whose record could not be allocated: veto every put. */
static unsigned int puma_truncs_anon;
static unsigned long puma_index_nr;
/* Pages held by lenders: the entries of puma_index_nr that name one. */
static unsigned long puma_remote_nr;
/* A truncate end was missed: never take a put again (fail safe). */
static bool puma_puts_off;

static bool puma_truncating(struct address_space *mapping);

/* For functions elsewhere whose callers must hold puma_index_lock. */
void puma_index_assert_locked(void)
{
	lockdep_assert_held(&puma_index_lock);
}

static const char *const puma_fs_types[] = { "ext4", "xfs" };

/**
 * puma_inode_eligible - may pages of this inode go to a lender
 * @inode: the file's inode
 *
 * Only regular files of local block file systems we covered (ext4, xfs),
 * never DAX, swap, encrypted or verity files (docs/puma.md: coverage).
 *
 * Return: true if the inode may be put.
 */
bool puma_inode_eligible(struct inode *inode)
{
	struct super_block *sb = inode->i_sb;
	unsigned int i;

	if (!S_ISREG(inode->i_mode) || inode->i_ino < 2)
		return false;
	if (IS_DAX(inode) || IS_SWAPFILE(inode) || IS_ENCRYPTED(inode) ||
	    IS_VERITY(inode))
		return false;
	if (!sb->s_bdev)
		return false;
	for (i = 0; i < ARRAY_SIZE(puma_fs_types); i++)
		if (!strcmp(sb->s_type->name, puma_fs_types[i]))
			return true;
	return false;
}

static struct puma_pool *puma_pool_find(struct super_block *sb, bool create)
{
	struct puma_pool *pool;

	lockdep_assert_held(&puma_index_lock);
	list_for_each_entry(pool, &puma_pools, node)
		if (pool->sb == sb)
			return pool;
	if (!create)
		return NULL;
	pool = kzalloc(sizeof(*pool), GFP_NOWAIT | __GFP_NOWARN);
	if (!pool)
		return NULL;
	pool->sb = sb;
	pool->dev = sb->s_dev;
	strscpy(pool->id, sb->s_id, sizeof(pool->id));
	do {
		pool->epoch = get_random_u64();
	} while (!pool->epoch);
	list_add(&pool->node, &puma_pools);
	return pool;
}

static u32 puma_file_hash(struct super_block *sb, u64 ino)
{
	return hash_64((unsigned long)sb ^ ino, 32);
}

static struct puma_file *puma_file_find(struct inode *inode, bool create)
{
	struct super_block *sb = inode->i_sb;
	u32 h = puma_file_hash(sb, inode->i_ino);
	struct puma_pool *pool;
	struct puma_file *f;

	lockdep_assert_held(&puma_index_lock);
	hash_for_each_possible(puma_files, f, hnode, h)
		if (f->pool->sb == sb && f->ino == inode->i_ino &&
		    f->gen == inode->i_generation)
			return f;
	if (!create)
		return NULL;
	pool = puma_pool_find(sb, true);
	if (!pool)
		return NULL;
	f = kzalloc(sizeof(*f), GFP_NOWAIT | __GFP_NOWARN);
	if (!f)
		return NULL;
	f->pool = pool;
	f->ino = inode->i_ino;
	f->gen = inode->i_generation;
	xa_init(&f->pages);
	hash_add(puma_files, &f->hnode, h);
	return f;
}

static void puma_entry_add(struct puma_file *f, unsigned long v)
{
	f->nr++;
	puma_index_nr++;
	if (v & PUMA_E_PEER_MASK) {
		f->remote++;
		f->pool->remote++;
		puma_remote_nr++;
	}
}

/* Account for the erased entry @v of @f; returns its lender or 0. */
static int puma_entry_del(struct puma_file *f, unsigned long v)
{
	f->nr--;
	puma_index_nr--;
	if (!(v & PUMA_E_PEER_MASK))
		return 0;
	f->remote--;
	f->pool->remote--;
	puma_remote_nr--;
	return v & PUMA_E_PEER_MASK;
}

/* @n remote pages of @f were forgotten. */
static void puma_count_inval(struct puma_file *f, unsigned long n)
{
	puma_count_n(PUMA_STAT_INVAL_PAGES, n);
	f->pool->stats[PUMA_FS_INVAL_PAGES] += n;
}

static void puma_fkey_fill(const struct puma_file *f, struct puma_fkey *fk)
{
	fk->pool = f->pool->epoch;
	fk->ino = f->ino;
	fk->gen = f->gen;
}

static void puma_cookie_read(struct inode *inode, struct puma_cookie *c)
{
	c->version = inode_query_iversion(inode);
	puma_inode_times(inode, &c->mtime, &c->ctime);
	c->size = i_size_read(inode);
}

static bool puma_cookie_eq(const struct puma_cookie *a,
			   const struct puma_cookie *b)
{
	return a->version == b->version &&
	       timespec64_equal(&a->mtime, &b->mtime) &&
	       timespec64_equal(&a->ctime, &b->ctime) &&
	       a->size == b->size;
}

static void puma_file_free(struct puma_file *f)
{
	lockdep_assert_held(&puma_index_lock);
	puma_index_nr -= f->nr;
	puma_remote_nr -= f->remote;
	f->pool->remote -= f->remote;
	puma_count_inval(f, f->remote);
	hash_del(&f->hnode);
	xa_destroy(&f->pages);
	kfree(f);
}

/* Erase entries start..end of F; returns the lenders that had some. */
static u32 puma_file_erase(struct puma_file *f, pgoff_t start, pgoff_t end)
{
	unsigned long idx;
	void *entry;
	u32 peers = 0;

	lockdep_assert_held(&puma_index_lock);
	xa_for_each_range(&f->pages, idx, entry, start, end) {
		int peer;

		xa_erase(&f->pages, idx);
		peer = puma_entry_del(f, xa_to_value(entry));
		if (peer) {
			peers |= BIT(peer);
			puma_count_inval(f, 1);
		}
	}
	return peers;
}

/*
 * Did the file of @f change since its remote entries were made?  If so,
 * whether a hook saw it or not, forget all of them (and tell their
 * lenders), and count an invalidation so that gets in flight drop their
 * answers.  A file with no remote entry just takes the current cookie.
 *
 * Return: true if the cookie had moved.
 */
static bool puma_file_check(struct puma_file *f, struct inode *inode)
{
	struct puma_cookie now;
	struct puma_fkey fk;
	u32 peers;
	int p;

	lockdep_assert_held(&puma_index_lock);
	puma_cookie_read(inode, &now);
	if (puma_cookie_eq(&f->cookie, &now))
		return false;
	f->cookie = now;
	f->seq++;
	if (!f->remote)
		return true;
	puma_count(PUMA_STAT_COOKIE_CHANGES);
	puma_fkey_fill(f, &fk);
	peers = puma_file_erase(f, 0, ULONG_MAX);
	for (p = 1; p <= PUMA_MAX_PEERS; p++)
		if (peers & BIT(p))
			puma_peer_queue_inval(p, &fk, PUMA_INVAL_FILE, 0, 0);
	return true;
}

static void puma_file_forget(struct puma_file *f, pgoff_t index)
{
	void *old;

	lockdep_assert_held(&puma_index_lock);
	old = xa_erase(&f->pages, index);
	if (old)
		puma_entry_del(f, xa_to_value(old));
}

/*
 * Is a write to @inode possibly under way, between its update of the
 * time stamps and the end of its copy of the data?  ext4's buffered
 * writes hold i_rwsem across both (ext4_buffered_write_iter()), and its
 * inline-data writes copy without any hook seeing them: a page put in
 * that window would pair the old data with the new cookie, and the
 * write that follows would leave it stale under a cookie that no longer
 * moves.  So no put is taken from such a file while anyone holds its
 * i_rwsem.  A holder that only reads (ext4's direct reads) costs a put,
 * never data.  Other file systems' writes all reach the dirty hook, and
 * XFS's buffered readers hold i_rwsem shared: they are not held back.
 *
 * The writer takes i_rwsem before it stores the new time stamps, so a
 * reader of the cookie that saw them, and then reads i_rwsem (after
 * smp_rmb()), sees it held.
 */
static bool puma_write_in_progress(struct inode *inode)
{
	return inode->i_sb->s_magic == EXT4_SUPER_MAGIC &&
	       inode_is_locked(inode);
}

/**
 * puma_index_note_put - record that a page of @inode goes to lender @peer
 * @inode: the file
 * @index: the page
 * @peer: the lender id
 * @fk: filled with the file's key
 * @fp: set to the file's record
 * @already: set if the lender already holds this unchanged page
 * @version: set to the new put's version (not if @already)
 *
 * Caller: the put hook, with interrupts off.  The caller queues the page
 * under the same lock hold only if this returned 0 and !*already.
 *
 * Return: 0, -EBUSY (sequential page, or a write under way: no put),
 * -ENOMEM, -ENOSPC (versions used up: no put ever again).
 */
static int puma_index_note_put(struct inode *inode, pgoff_t index,
			       int peer, struct puma_fkey *fk,
			       struct puma_file **fp, bool *already,
			       u64 *version)
{
	struct puma_file *f;
	void *old;

	lockdep_assert_held(&puma_index_lock);
	*already = false;
	f = puma_file_find(inode, true);
	if (!f)
		return -ENOMEM;
	*fp = f;
	puma_file_check(f, inode);
	/* The cookie was read above; the state of i_rwsem is read after. */
	smp_rmb();
	if (puma_write_in_progress(inode)) {
		puma_file_forget(f, index);
		puma_count(PUMA_STAT_DROP_WRITING);
		return -EBUSY;
	}
	old = xa_load(&f->pages, index);
	if (old && (xa_to_value(old) & PUMA_E_SEQ)) {
		xa_erase(&f->pages, index);
		puma_entry_del(f, xa_to_value(old));
		puma_count(PUMA_STAT_DROP_SEQUENTIAL);
		return -EBUSY;
	}
	puma_fkey_fill(f, fk);
	if (old && (xa_to_value(old) & PUMA_E_PEER_MASK) == peer &&
	    !puma_cfg.exclusive) {
		*already = true;
		return 0;
	}
	*version = puma_seal_version();
	if (!*version)
		return -ENOSPC;
	if (xa_err(xa_store(&f->pages, index,
			    xa_mk_value(peer |
					*version << PUMA_E_VER_SHIFT),
			    GFP_NOWAIT | __GFP_NOWARN)))
		return -ENOMEM;
	if (!old)
		puma_entry_add(f, peer);
	f->peers |= BIT(peer);
	return 0;
}

/*
 * Erase the "read sequentially" marks of [@start, @start + @nr) of
 * @inode.  A mark only says "do not put this page when it is evicted":
 * once the page left the page cache without a put, it would otherwise
 * stay for as long as the inode does.
 */
static void puma_drop_marks(struct inode *inode, pgoff_t start,
			    unsigned long nr)
{
	struct puma_file *f;
	unsigned long idx;
	void *entry;

	lockdep_assert_held(&puma_index_lock);
	f = puma_file_find(inode, false);
	if (!f || !f->nr)
		return;
	xa_for_each_range(&f->pages, idx, entry, start, start + nr - 1) {
		if (!(xa_to_value(entry) & PUMA_E_SEQ))
			continue;
		xa_erase(&f->pages, idx);
		puma_entry_del(f, xa_to_value(entry));
	}
}

/**
 * puma_index_evicted - pages of @inode left the page cache without a put
 * @inode: the file
 * @start: first page
 * @nr: number of pages
 *
 * For folios the put path does not take (large folios): their
 * sequential marks go, as they would with a put.
 */
void puma_index_evicted(struct inode *inode, pgoff_t start, unsigned long nr)
{
	unsigned long flags;

	spin_lock_irqsave(&puma_index_lock, flags);
	puma_drop_marks(inode, start, nr);
	spin_unlock_irqrestore(&puma_index_lock, flags);
}

/**
 * puma_index_put_page - a clean page of @inode leaves the page cache
 * @inode: the file (eligible, see puma_inode_eligible())
 * @mapping: its mapping
 * @index: the page index
 * @data: the page's content
 * @large: the page is one of a large folio's (counted apart)
 *
 * Caller: the put hook, interrupts off.  Records the put and queues the
 * data under puma_index_lock, so that puts and invalidations of a page
 * reach the lender in the order they happened here.
 */
void puma_index_put_page(struct inode *inode, struct address_space *mapping,
			 pgoff_t index, const void *data, bool large)
{
	struct puma_fkey fk;
	struct puma_file *f;
	unsigned long flags;
	bool already;
	u64 version;
	int peer, ret;

	spin_lock_irqsave(&puma_index_lock, flags);
	if (puma_truncating(mapping)) {
		puma_count(PUMA_STAT_DROP_TRUNCATING);
		goto out_drop_mark;
	}
	peer = puma_peer_pick();
	if (peer <= 0) {
		puma_count(peer ? PUMA_STAT_DROP_SUSPENDED :
			   PUMA_STAT_DROP_NO_PEER);
		goto out_drop_mark;
	}
	ret = puma_index_note_put(inode, index, peer, &fk, &f, &already,
				  &version);
	if (ret) {
		if (ret == -ENOMEM || ret == -ENOSPC)
			puma_count(PUMA_STAT_DROP_NOMEM);
		goto out_unlock;
	}
	if (already) {
		puma_count(PUMA_STAT_PUTS_SKIPPED_CLEAN);
		f->pool->stats[PUMA_FS_PUTS_SKIPPED_CLEAN]++;
		goto out_unlock;
	}
	if (puma_peer_queue_put(peer, &fk, index, version, data)) {
		puma_file_forget(f, index);
		goto out_unlock;
	}
	puma_count(PUMA_STAT_PUTS);
	if (large)
		puma_count(PUMA_STAT_PUTS_LARGE);
	f->pool->stats[PUMA_FS_PUTS]++;
	goto out_unlock;
out_drop_mark:
	/* Not put: the page's mark, if any, has no use any more. */
	puma_drop_marks(inode, index, 1);
out_unlock:
	spin_unlock_irqrestore(&puma_index_lock, flags);
}

/**
 * puma_index_lookup - which lender holds this page, if any
 * @inode: the file
 * @index: the page
 * @fk: filled with the file's key on success
 * @seq: filled with the file's invalidation count on success
 * @version: filled with the version of the page's put on success: the
 *	     only one whose blob the get may accept
 *
 * Return: the lender id, or 0 if no lender holds the page.
 */
int puma_index_lookup(struct inode *inode, pgoff_t index,
		      struct puma_fkey *fk, unsigned long *seq, u64 *version)
{
	struct puma_file *f;
	unsigned long flags;
	void *entry;
	int peer = 0;

	spin_lock_irqsave(&puma_index_lock, flags);
	f = puma_file_find(inode, false);
	if (f && !puma_file_check(f, inode)) {
		entry = xa_load(&f->pages, index);
		if (entry)
			peer = xa_to_value(entry) & PUMA_E_PEER_MASK;
		if (peer) {
			puma_fkey_fill(f, fk);
			*seq = f->seq;
			*version = puma_entry_version(xa_to_value(entry));
		}
	}
	spin_unlock_irqrestore(&puma_index_lock, flags);
	return peer;
}

/**
 * puma_index_still_valid - may a page fetched for @fk be used
 * @inode: the file
 * @index: the page
 * @fk: the key the page was asked for
 * @seq: the file's invalidation count when it was asked for
 *
 * Return: true if nothing invalidated the file since the get was sent,
 * and its change cookie did not move.
 */
bool puma_index_still_valid(struct inode *inode, pgoff_t index,
			    const struct puma_fkey *fk, unsigned long seq)
{
	struct puma_file *f;
	unsigned long flags;
	bool ok = false;

	spin_lock_irqsave(&puma_index_lock, flags);
	f = puma_file_find(inode, false);
	if (f && !puma_file_check(f, inode) && f->seq == seq &&
	    f->pool->epoch == fk->pool && f->gen == fk->gen)
		ok = true;
	spin_unlock_irqrestore(&puma_index_lock, flags);
	return ok;
}

/**
 * puma_index_forget - forget one page (exclusive get, failed put)
 * @inode: the file
 * @index: the page
 */
void puma_index_forget(struct inode *inode, pgoff_t index)
{
	struct puma_file *f;
	unsigned long flags;

	spin_lock_irqsave(&puma_index_lock, flags);
	f = puma_file_find(inode, false);
	if (f)
		puma_file_forget(f, index);
	spin_unlock_irqrestore(&puma_index_lock, flags);
}

/* Forget @index of @inode if it is listed at @peer; true if it was. */
static bool puma_index_forget_peer(struct inode *inode, pgoff_t index,
				   int peer)
{
	struct puma_file *f;
	unsigned long flags;
	bool found = false;
	void *entry;

	spin_lock_irqsave(&puma_index_lock, flags);
	f = puma_file_find(inode, false);
	entry = f ? xa_load(&f->pages, index) : NULL;
	if (entry && (xa_to_value(entry) & PUMA_E_PEER_MASK) == peer) {
		xa_erase(&f->pages, index);
		puma_entry_del(f, xa_to_value(entry));
		found = true;
	}
	spin_unlock_irqrestore(&puma_index_lock, flags);
	return found;
}

/**
 * puma_index_forget_missed - lender @peer answered that it lacks a page
 * @inode: the file
 * @index: the page
 * @peer: the lender asked
 *
 * It dropped its copy (its shrinker, a capacity or memory limit): forget
 * the entry, so that later reads of the page go straight to the disk and
 * its next eviction puts it again (a listed page is not sent again, see
 * puma_index_put_page()).  The entry is still the one the get was sent
 * for: the folio stayed locked in the page cache, so no put of the page
 * can have come in between.
 */
void puma_index_forget_missed(struct inode *inode, pgoff_t index, int peer)
{
	if (puma_index_forget_peer(inode, index, peer))
		puma_count(PUMA_STAT_MISSES_FORGOTTEN);
}

/**
 * puma_index_forget_bad - lender @peer answered with a blob that failed
 * @inode: the file
 * @index: the page
 * @peer: the lender asked
 *
 * Its copy is no good (seal.c): forget the entry, as for a miss, so that
 * the page is read from the disk and put again at its next eviction.
 */
void puma_index_forget_bad(struct inode *inode, pgoff_t index, int peer)
{
	puma_index_forget_peer(inode, index, peer);
}

/**
 * puma_index_count_gets - add the outcome of a get to its file system
 * @inode: the file the pages were asked for
 * @hits: pages used from the lender's answer
 * @misses: pages the lender did not have (or the get failed)
 * @stale: pages answered but refused because the file changed
 *
 * The global counters are kept by the caller; this is the share of the
 * file's pool, so the pages asked for are the sum of the three.
 */
void puma_index_count_gets(struct inode *inode, unsigned int hits,
			   unsigned int misses, unsigned int stale)
{
	struct puma_pool *pool;
	unsigned long flags;

	spin_lock_irqsave(&puma_index_lock, flags);
	pool = puma_pool_find(inode->i_sb, false);
	if (pool) {
		pool->stats[PUMA_FS_GETS] += hits + misses + stale;
		pool->stats[PUMA_FS_HITS] += hits;
		pool->stats[PUMA_FS_MISSES] += misses;
		pool->stats[PUMA_FS_GET_STALE] += stale;
	}
	spin_unlock_irqrestore(&puma_index_lock, flags);
}

/**
 * puma_index_fs_show - the counters of each file system, for fs_stats
 * @buf: a sysfs buffer of PAGE_SIZE bytes
 *
 * One line per pool, i.e. per mounted file system a page was put or
 * marked from since it was mounted: s_id, MAJOR:MINOR, then name=value
 * pairs.  Lines that do not fit in the page whole are left out.
 *
 * Return: the bytes written.
 */
ssize_t puma_index_fs_show(char *buf)
{
	struct puma_pool *pool;
	unsigned long flags;
	char line[384];
	ssize_t n = 0;
	int i, len;

	spin_lock_irqsave(&puma_index_lock, flags);
	list_for_each_entry(pool, &puma_pools, node) {
		len = scnprintf(line, sizeof(line), "%s %u:%u", pool->id,
				MAJOR(pool->dev), MINOR(pool->dev));
		for (i = 0; i < PUMA_FS_NR; i++)
			len += scnprintf(line + len, sizeof(line) - len,
					 " %s=%llu",
					 puma_stat_names[puma_fs_stat_global[i]],
					 pool->stats[i]);
		len += scnprintf(line + len, sizeof(line) - len,
				 " remote_pages=%lu\n", pool->remote);
		if (n + len >= PAGE_SIZE)
			break;
		memcpy(buf + n, line, len);
		n += len;
	}
	spin_unlock_irqrestore(&puma_index_lock, flags);
	return n;
}

/**
 * puma_index_inval - the content of pages @start..@end of @inode changes
 * @inode: the file
 * @start: first page index
 * @end: last page index (inclusive); ULONG_MAX for the end of the file
 *
 * Synchronous: when this returns no get will ask for these pages, and a
 * get already in flight for the file will drop its answer.
 */
void puma_index_inval(struct inode *inode, pgoff_t start, pgoff_t end)
{
	struct puma_fkey fk;
	struct puma_file *f;
	unsigned long flags;
	u32 peers;
	int p;

	spin_lock_irqsave(&puma_index_lock, flags);
	f = puma_file_find(inode, false);
	if (!f)
		goto out_unlock;
	puma_count(PUMA_STAT_INVAL_EVENTS);
	f->seq++;
	puma_fkey_fill(f, &fk);
	peers = puma_file_erase(f, start, end);
	for (p = 1; p <= PUMA_MAX_PEERS; p++) {
		if (!(f->peers & BIT(p)))
			continue;
		if (start == 0 && end == ULONG_MAX)
			puma_peer_queue_inval(p, &fk, PUMA_INVAL_FILE, 0, 0);
		else if (peers & BIT(p))
			puma_peer_queue_inval(p, &fk, PUMA_INVAL_RANGE, start,
					      end);
	}
	if (start == 0 && end == ULONG_MAX)
		puma_file_free(f);
out_unlock:
	spin_unlock_irqrestore(&puma_index_lock, flags);
}

/**
 * puma_index_mark_sequential - pages read by a sequential stream
 * @inode: the file
 * @start: first page
 * @nr: number of pages
 *
 * Policy (sequential filter): these pages will not be put on eviction.
 * Their marks go when they leave the page cache, put or not.
 */
void puma_index_mark_sequential(struct inode *inode, pgoff_t start,
				unsigned long nr)
{
	struct puma_file *f;
	unsigned long flags;
	pgoff_t i;

	spin_lock_irqsave(&puma_index_lock, flags);
	f = puma_file_find(inode, true);
	for (i = start; f && i < start + nr; i++) {
		void *old = xa_load(&f->pages, i);

		if (old)
			continue;
		if (xa_err(xa_store(&f->pages, i, xa_mk_value(PUMA_E_SEQ),
				    GFP_NOWAIT | __GFP_NOWARN)))
			break;
		puma_entry_add(f, PUMA_E_SEQ);
	}
	spin_unlock_irqrestore(&puma_index_lock, flags);
}

/**
 * puma_index_drop_sb - a superblock goes away (unmount)
 * @sb: the superblock
 */
void puma_index_drop_sb(struct super_block *sb)
{
	struct puma_fkey fk = { };
	struct hlist_node *tmp;
	struct puma_pool *pool;
	struct puma_file *f;
	unsigned long flags;
	u32 peers = 0;
	int bkt, p;

	spin_lock_irqsave(&puma_index_lock, flags);
	pool = puma_pool_find(sb, false);
	if (!pool)
		goto out_unlock;
	hash_for_each_safe(puma_files, bkt, tmp, f, hnode) {
		if (f->pool != pool)
			continue;
		peers |= f->peers;
		puma_file_free(f);
	}
	fk.pool = pool->epoch;
	for (p = 1; p <= PUMA_MAX_PEERS; p++)
		if (peers & BIT(p))
			puma_peer_queue_inval(p, &fk, PUMA_INVAL_POOL, 0, 0);
	list_del(&pool->node);
	kfree(pool);
	puma_count(PUMA_STAT_INVAL_EVENTS);
out_unlock:
	spin_unlock_irqrestore(&puma_index_lock, flags);
}

/**
 * puma_index_drop_peer - forget every page held by lender @peer
 * @peer: the lender id (its connection closed, or it suspended lending)
 */
void puma_index_drop_peer(int peer)
{
	struct hlist_node *tmp;
	struct puma_file *f;
	unsigned long flags, idx;
	void *entry;
	int bkt;

	spin_lock_irqsave(&puma_index_lock, flags);
	hash_for_each_safe(puma_files, bkt, tmp, f, hnode) {
		if (!(f->peers & BIT(peer)))
			continue;
		xa_for_each(&f->pages, idx, entry) {
			if ((xa_to_value(entry) & PUMA_E_PEER_MASK) != peer)
				continue;
			xa_erase(&f->pages, idx);
			puma_entry_del(f, xa_to_value(entry));
			puma_count_inval(f, 1);
		}
		f->peers &= ~BIT(peer);
		f->seq++;
	}
	spin_unlock_irqrestore(&puma_index_lock, flags);
}

/**
 * puma_index_drop_all - forget everything (module unload, lost hook)
 */
void puma_index_drop_all(void)
{
	struct puma_pool *pool, *ptmp;
	struct hlist_node *tmp;
	struct puma_file *f;
	unsigned long flags;
	int bkt;

	spin_lock_irqsave(&puma_index_lock, flags);
	hash_for_each_safe(puma_files, bkt, tmp, f, hnode)
		puma_file_free(f);
	list_for_each_entry_safe(pool, ptmp, &puma_pools, node) {
		list_del(&pool->node);
		kfree(pool);
	}
	spin_unlock_irqrestore(&puma_index_lock, flags);
}

static struct puma_trunc *puma_trunc_find(struct address_space *mapping)
{
	struct puma_trunc *t;

	hash_for_each_possible(puma_truncs, t, hnode, hash_ptr(mapping, 32))
		if (t->mapping == mapping)
			return t;
	return NULL;
}

/**
 * puma_truncating - is a truncate of @mapping in progress
 * @mapping: the file's mapping
 *
 * Caller holds puma_index_lock.
 *
 * Return: true if puts of this mapping must not be taken now.
 */
static bool puma_truncating(struct address_space *mapping)
{
	lockdep_assert_held(&puma_index_lock);
	return puma_puts_off || puma_truncs_anon || puma_trunc_find(mapping);
}

/**
 * puma_index_puts_off - stop taking puts for good
 *
 * Called when a truncate's end could not be observed: the veto of puts
 * during truncates can no longer be guaranteed, so no put is taken.
 */
void puma_index_puts_off(void)
{
	unsigned long flags;

	spin_lock_irqsave(&puma_index_lock, flags);
	if (!puma_puts_off)
		pr_warn("truncate end missed: puts disabled until reload\n");
	puma_puts_off = true;
	spin_unlock_irqrestore(&puma_index_lock, flags);
}

/**
 * puma_truncate_begin - a truncate or hole punch of @mapping starts
 * @mapping: the file's mapping
 */
void puma_truncate_begin(struct address_space *mapping)
{
	struct puma_trunc *t;
	unsigned long flags;

	spin_lock_irqsave(&puma_index_lock, flags);
	t = puma_trunc_find(mapping);
	if (!t) {
		t = kzalloc(sizeof(*t), GFP_NOWAIT | __GFP_NOWARN);
		if (t) {
			t->mapping = mapping;
			hash_add(puma_truncs, &t->hnode, hash_ptr(mapping, 32));
		}
	}
	if (t)
		t->count++;
	else
		puma_truncs_anon++;
	spin_unlock_irqrestore(&puma_index_lock, flags);
}

/**
 * puma_truncate_end - the truncate started by puma_truncate_begin() ended
 * @mapping: the file's mapping
 */
void puma_truncate_end(struct address_space *mapping)
{
	struct puma_trunc *t;
	unsigned long flags;

	spin_lock_irqsave(&puma_index_lock, flags);
	t = puma_trunc_find(mapping);
	if (t && !--t->count) {
		hash_del(&t->hnode);
		kfree(t);
	} else if (!t && puma_truncs_anon) {
		puma_truncs_anon--;
	}
	spin_unlock_irqrestore(&puma_index_lock, flags);
}

/**
 * puma_index_pages - pages held by lenders
 *
 * Return: the number of index entries that name a lender.
 */
unsigned long puma_index_pages(void)
{
	return READ_ONCE(puma_remote_nr);
}

/**
 * puma_index_markers - pages marked "read sequentially: do not put"
 *
 * Return: the number of index entries that name no lender.
 */
unsigned long puma_index_markers(void)
{
	return READ_ONCE(puma_index_nr) - READ_ONCE(puma_remote_nr);
}

int puma_index_init(void)
{
	/* A peer is a bit of a file's lender set and of an entry's value. */
	BUILD_BUG_ON(PUMA_MAX_PEERS >=
		     sizeof_field(struct puma_file, peers) * BITS_PER_BYTE);
	BUILD_BUG_ON(PUMA_MAX_PEERS > PUMA_E_PEER_MASK);
	BUILD_BUG_ON(PUMA_E_SEQ <= PUMA_E_PEER_MASK);
	BUILD_BUG_ON(PUMA_E_SEQ >= 1UL << PUMA_E_VER_SHIFT);
	/* Peer, sequential mark and version share one xarray value. */
	BUILD_BUG_ON(PUMA_E_VER_SHIFT + PUMA_SEAL_VERSION_BITS >
		     BITS_PER_LONG - 1);
	return 0;
}

void puma_index_exit(void)
{
	struct hlist_node *tmp;
	struct puma_trunc *t;
	unsigned long flags;
	int bkt;

	puma_index_drop_all();
	spin_lock_irqsave(&puma_index_lock, flags);
	hash_for_each_safe(puma_truncs, bkt, tmp, t, hnode) {
		hash_del(&t->hnode);
		kfree(t);
	}
	spin_unlock_irqrestore(&puma_index_lock, flags);
}
