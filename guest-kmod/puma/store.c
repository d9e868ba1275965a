// SPDX-License-Identifier: GPL-2.0
/*
 * Lender store: the pages borrowers put here, given back at once.
 *
 * The lender's own memory needs always win.  Hosted pages are allocated
 * with GFP_NOWAIT (a put never makes the lender reclaim, never waits) and
 * a shrinker hands them back to the kernel's reclaim, oldest first; the
 * activity detector (policy.c) empties the store when the lender gets
 * busy.  Each borrower connection is a session with its own page budget
 * (puma_cfg.capacity_pages); a session's pages die with its connection.
 *
 * What is stored is opaque: the blob a borrower sealed (seal.c), the
 * ciphertext of its page and a tag, PUMA_BLOB_BYTES, which the lender can
 * neither read nor change unnoticed.  Each takes a page for the
 * ciphertext and the tag's bytes beside it in the struct puma_hpage; the
 * accounting (capacity, hosted_pages, the shrinker) counts blobs.
 *
 * A put of a key already stored overwrites the copy; a put that cannot be
 * stored (budget, memory, lending suspended) deletes the copy, so a copy
 * is always the latest put of its key or absent (docs/puma-never-stale.md).
 *
 * Implementation: puma_objs hashes the files (session, pool, ino, gen) to
 * an xarray of struct puma_hpage by index; every hosted page is on
 * puma_lru.  The borrower chooses pool, ino and gen, so the hash is keyed
 * (SipHash, with a key drawn at load): it cannot aim its files at one
 * bucket.  puma_store_lock protects all of it (process context only:
 * the receiving threads and the shrinker).
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/hashtable.h>
#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/random.h>
#include <linux/sched.h>
#include <linux/shrinker.h>
#include <linux/siphash.h>
#include <linux/slab.h>
#include <linux/swap.h>
#include <linux/xarray.h>

#include "compat.h"
#include "puma.h"

struct puma_sess {
	struct list_head objs;
	unsigned long hosted;
};

struct puma_obj {
	struct hlist_node hnode;
	struct list_head snode;	/* sess->objs */
	struct puma_sess *sess;
	u64 pool;
	u64 ino;
	u32 gen;
	unsigned long nr;
	struct xarray pages;
};

#define PUMA_BLOB_TAIL	(PUMA_BLOB_BYTES - PUMA_PAGE_BYTES)

struct puma_hpage {
	struct list_head lru;
	struct puma_obj *obj;
	pgoff_t index;
	struct page *page;		/* the first PUMA_PAGE_BYTES */
	u8 tail[PUMA_BLOB_TAIL];	/* the rest of the blob */
};

static void puma_hpage_fill(struct puma_hpage *hp, const u8 *blob)
{
	memcpy_to_page(hp->page, 0, blob, PUMA_PAGE_BYTES);
	memcpy(hp->tail, blob + PUMA_PAGE_BYTES, PUMA_BLOB_TAIL);
}

static DEFINE_SPINLOCK(puma_store_lock);
static DEFINE_HASHTABLE(puma_objs, 12);
static LIST_HEAD(puma_lru);
static atomic_long_t puma_hosted = ATOMIC_LONG_INIT(0);
static siphash_key_t puma_hash_key;
/* The longest chain of puma_objs a lookup walked (stats: lend_max_chain). */
static unsigned long puma_objs_max_chain;

static u32 puma_obj_hash(struct puma_sess *s, u64 pool, u64 ino, u32 gen)
{
	return siphash_4u64((unsigned long)s, pool, ino, gen, &puma_hash_key);
}

static struct puma_obj *puma_obj_find(struct puma_sess *s,
				      const struct puma_key *k, bool create)
{
	u64 pool = le64_to_cpu(k->pool), ino = le64_to_cpu(k->ino);
	u32 gen = le32_to_cpu(k->gen);
	u32 h = puma_obj_hash(s, pool, ino, gen);
	unsigned long walked = 0;
	struct puma_obj *o;

	lockdep_assert_held(&puma_store_lock);
	hash_for_each_possible(puma_objs, o, hnode, h) {
		if (o->sess == s && o->pool == pool && o->ino == ino &&
		    o->gen == gen)
			return o;
		walked++;
	}
	if (walked > puma_objs_max_chain)
		WRITE_ONCE(puma_objs_max_chain, walked);
	if (!create)
		return NULL;
	o = kzalloc(sizeof(*o), GFP_NOWAIT | __GFP_NOWARN);
	if (!o)
		return NULL;
	o->sess = s;
	o->pool = pool;
	o->ino = ino;
	o->gen = gen;
	xa_init(&o->pages);
	hash_add(puma_objs, &o->hnode, h);
	list_add(&o->snode, &s->objs);
	return o;
}

static void puma_hpage_free(struct puma_hpage *hp)
{
	struct puma_obj *o = hp->obj;

	lockdep_assert_held(&puma_store_lock);
	xa_erase(&o->pages, hp->index);
	list_del(&hp->lru);
	o->nr--;
	o->sess->hosted--;
	atomic_long_dec(&puma_hosted);
	__free_page(hp->page);
	kfree(hp);
	if (!o->nr) {
		hash_del(&o->hnode);
		list_del(&o->snode);
		xa_destroy(&o->pages);
		kfree(o);
	}
}

static void puma_obj_drop(struct puma_obj *o, pgoff_t start, pgoff_t end)
{
	struct puma_hpage *hp;
	unsigned long idx;
	unsigned long nr = o->nr;

	xa_for_each_range(&o->pages, idx, hp, start, end) {
		puma_hpage_free(hp);
		if (!--nr)
			return;	/* o is gone */
	}
}

/**
 * puma_store_put - store a borrower's blob
 * @s: the borrower's session
 * @k: the key
 * @blob: PUMA_BLOB_BYTES bytes
 *
 * Return: 0 if stored; otherwise the key has no copy any more.
 */
int puma_store_put(struct puma_sess *s, const struct puma_key *k,
		   const void *blob)
{
	pgoff_t index = le64_to_cpu(k->index);
	struct puma_hpage *hp = NULL;
	struct puma_obj *o;
	int ret = 0;

	spin_lock(&puma_store_lock);
	o = puma_obj_find(s, k, false);
	if (o)
		hp = xa_load(&o->pages, index);
	if (puma_lender_suspended()) {
		puma_count(PUMA_STAT_LEND_DROP_SUSPENDED);
		ret = -EBUSY;
		goto out_drop;
	}
	if (hp) {
		puma_hpage_fill(hp, blob);
		list_move_tail(&hp->lru, &puma_lru);
		goto out_unlock;
	}
	if (s->hosted >= READ_ONCE(puma_cfg.capacity_pages)) {
		puma_count(PUMA_STAT_LEND_DROP_CAPACITY);
		ret = -ENOSPC;
		goto out_unlock;
	}
	ret = -ENOMEM;
	o = puma_obj_find(s, k, true);
	if (!o)
		goto out_nomem;
	hp = kmalloc(sizeof(*hp), GFP_NOWAIT | __GFP_NOWARN);
	if (!hp)
		goto out_nomem;
	hp->page = alloc_page(GFP_NOWAIT | __GFP_NOWARN);
	if (!hp->page)
		goto out_free_hp;
	if (xa_err(xa_store(&o->pages, index, hp,
			    GFP_NOWAIT | __GFP_NOWARN)))
		goto out_free_page;
	puma_hpage_fill(hp, blob);
	hp->obj = o;
	hp->index = index;
	list_add_tail(&hp->lru, &puma_lru);
	o->nr++;
	s->hosted++;
	atomic_long_inc(&puma_hosted);
	spin_unlock(&puma_store_lock);
	return 0;

out_free_page:
	__free_page(hp->page);
out_free_hp:
	kfree(hp);
	hp = NULL;
out_nomem:
	puma_count(PUMA_STAT_LEND_DROP_NOMEM);
	if (o && !o->nr) {
		hash_del(&o->hnode);
		list_del(&o->snode);
		kfree(o);
	}
	goto out_unlock;
out_drop:
	if (hp)
		puma_hpage_free(hp);
out_unlock:
	spin_unlock(&puma_store_lock);
	return ret;
}

/**
 * puma_store_get - copy a stored blob out
 * @s: the borrower's session
 * @k: the key
 * @dst: PUMA_BLOB_BYTES bytes
 * @exclusive: drop the copy after it was read
 *
 * Return: true if found.
 */
bool puma_store_get(struct puma_sess *s, const struct puma_key *k, void *dst,
		    bool exclusive)
{
	struct puma_hpage *hp = NULL;
	struct puma_obj *o;

	spin_lock(&puma_store_lock);
	o = puma_obj_find(s, k, false);
	if (o)
		hp = xa_load(&o->pages, le64_to_cpu(k->index));
	if (hp) {
		memcpy_from_page(dst, hp->page, 0, PUMA_PAGE_BYTES);
		memcpy((u8 *)dst + PUMA_PAGE_BYTES, hp->tail, PUMA_BLOB_TAIL);
		if (exclusive)
			puma_hpage_free(hp);
		else
			list_move_tail(&hp->lru, &puma_lru);
	}
	spin_unlock(&puma_store_lock);
	return hp;
}

/**
 * puma_store_inval - drop the copies an INVAL names
 * @s: the borrower's session
 * @inv: the checked INVAL payload
 */
void puma_store_inval(struct puma_sess *s, const struct puma_inval *inv)
{
	struct puma_key k = { .pool = inv->pool, .ino = inv->ino,
			      .gen = inv->gen };
	struct puma_obj *o, *tmp;
	u64 pool = le64_to_cpu(inv->pool);

	spin_lock(&puma_store_lock);
	switch (le32_to_cpu(inv->kind)) {
	case PUMA_INVAL_POOL:
		list_for_each_entry_safe(o, tmp, &s->objs, snode)
			if (o->pool == pool)
				puma_obj_drop(o, 0, ULONG_MAX);
		break;
	case PUMA_INVAL_FILE:
		o = puma_obj_find(s, &k, false);
		if (o)
			puma_obj_drop(o, 0, ULONG_MAX);
		break;
	default:
		o = puma_obj_find(s, &k, false);
		if (o)
			puma_obj_drop(o, le64_to_cpu(inv->start),
				      le64_to_cpu(inv->end));
	}
	spin_unlock(&puma_store_lock);
}

struct puma_sess *puma_store_sess_new(void)
{
	struct puma_sess *s = kzalloc(sizeof(*s), GFP_KERNEL);

	if (s)
		INIT_LIST_HEAD(&s->objs);
	return s;
}

void puma_store_sess_free(struct puma_sess *s)
{
	struct puma_obj *o, *tmp;

	spin_lock(&puma_store_lock);
	list_for_each_entry_safe(o, tmp, &s->objs, snode)
		puma_obj_drop(o, 0, ULONG_MAX);
	spin_unlock(&puma_store_lock);
	kfree(s);
}

/* Free up to @nr of the oldest pages; returns how many were freed. */
static unsigned long puma_store_evict(unsigned long nr)
{
	unsigned long freed = 0;

	spin_lock(&puma_store_lock);
	while (freed < nr && !list_empty(&puma_lru)) {
		puma_hpage_free(list_first_entry(&puma_lru, struct puma_hpage,
						 lru));
		freed++;
		if (!(freed % 256) && need_resched()) {
			spin_unlock(&puma_store_lock);
			cond_resched();
			spin_lock(&puma_store_lock);
		}
	}
	spin_unlock(&puma_store_lock);
	return freed;
}

/**
 * puma_store_drop_all - give every hosted page back (lender got busy)
 */
void puma_store_drop_all(void)
{
	puma_store_evict(ULONG_MAX);
}

/* The longest chain of other files a lookup walked since the load. */
unsigned long puma_store_max_chain(void)
{
	return READ_ONCE(puma_objs_max_chain);
}

unsigned long puma_store_hosted(void)
{
	return atomic_long_read(&puma_hosted);
}

static unsigned long puma_shrink_count(struct shrinker *sh,
				       struct shrink_control *sc)
{
	unsigned long n = atomic_long_read(&puma_hosted);

	return n ? n : SHRINK_EMPTY;
}

static unsigned long puma_shrink_scan(struct shrinker *sh,
				      struct shrink_control *sc)
{
	unsigned long freed = puma_store_evict(sc->nr_to_scan);

	puma_count_n(PUMA_STAT_LEND_SHRUNK, freed);
	puma_account_reclaimed(freed);
	return freed ? freed : SHRINK_STOP;
}

static struct shrinker *puma_shrinker;

int puma_store_init(void)
{
	get_random_bytes(&puma_hash_key, sizeof(puma_hash_key));
	puma_shrinker = puma_shrinker_create("puma-store", puma_shrink_count,
					     puma_shrink_scan);
	return puma_shrinker ? 0 : -ENOMEM;
}

void puma_store_exit(void)
{
	puma_shrinker_destroy(puma_shrinker);
	puma_store_drop_all();
}
