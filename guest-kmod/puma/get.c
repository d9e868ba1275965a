// SPDX-License-Identifier: GPL-2.0
/*
 * Get: on a page-cache miss, ask the lender before the file system reads.
 *
 * Every generic read miss (read(2), page faults, readahead, fadvise) ends
 * in one of two static mm functions, read_pages() for readahead batches and
 * filemap_read_folio() for single folios; both are out of line and traced
 * by ftrace on the Debian 6.1 and 6.12 kernels.  An ftrace callback with
 * FTRACE_OPS_FL_IPMODIFY moves the instruction pointer to our replacement,
 * which is a full rewrite of the function that calls only exported
 * functions and address_space_operations pointers (IBT rule: the original
 * and its static helpers are never called through a pointer).  The one
 * non-exported call of the original, filemap_remove_folio() in the
 * clean-up of folios ->readahead left behind, becomes "leave the folio,
 * not uptodate, in the cache", which a later read fills in.
 *
 * In a readahead batch, runs of folios the index says a lender holds are
 * asked for in one GET (at most PUMA_BATCH_MAX pages) while the others go
 * to ->readahead as a sub-batch.  A large folio (XFS) belongs to a remote
 * run only if one lender holds every page of it, and is marked up to
 * date only if every page comes back; otherwise ->read_folio reads all
 * of it.  A folio above PUMA_BATCH_MAX pages goes alone, in several GETs
 * (puma_get_big()), with the same rule.  A page of the answer is used only if it
 * opens (seal.c: the tag checks out for this page and for the version of
 * the put the index recorded, and it decrypts), and the file saw no
 * invalidation since the GET was sent (puma_index_still_valid());
 * anything else (miss, bad blob, timeout, error, invalidation) falls back
 * to ->read_folio, i.e. the disk.  Opening happens here, in the reading
 * task, with the folio still locked and not up to date.
 *
 * Implementation: puma_redirects holds the two ftrace_ops; puma_get_inflight
 * counts tasks redirected and not yet out of our code, so that unloading
 * waits for them.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/blkdev.h>
#include <linux/delay.h>
#include <linux/ftrace.h>
#include <linux/kprobes.h>
#include <linux/pagemap.h>
#include <linux/psi.h>
#include <linux/slab.h>

#include "compat.h"
#include "puma.h"

static atomic_t puma_get_inflight = ATOMIC_INIT(0);
static bool puma_get_stopping;

static bool puma_get_wanted(struct inode *inode)
{
	return READ_ONCE(puma_cfg.borrower) && inode &&
	       puma_inode_eligible(inode);
}

/* Apply the pending batch count, as __readahead_folio() does. */
static void puma_rac_settle(struct readahead_control *rac)
{
	rac->_nr_pages -= rac->_batch_count;
	rac->_index += rac->_batch_count;
	rac->_batch_count = 0;
}

/* The stock read_pages() body, minus filemap_remove_folio(). */
static void puma_read_local(struct readahead_control *rac)
{
	const struct address_space_operations *aops = rac->mapping->a_ops;
	struct folio *folio;

	if (aops->readahead) {
		aops->readahead(rac);
		while ((folio = readahead_folio(rac)) != NULL) {
			unsigned long nr = folio_nr_pages(folio);

			folio_get(folio);
			rac->ra->size -= nr;
			if (rac->ra->async_size >= nr)
				rac->ra->async_size -= nr;
			folio_unlock(folio);
			folio_put(folio);
		}
	} else {
		while ((folio = readahead_folio(rac)) != NULL)
			aops->read_folio(rac->file, folio);
	}
}

enum {
	PUMA_GET_HIT,
	PUMA_GET_HIT_LARGE,	/* of which in large folios */
	PUMA_GET_MISS,
	PUMA_GET_STALE,
	PUMA_GET_NR
};

static void puma_count_gets(struct inode *inode, const unsigned int *n)
{
	puma_count_n(PUMA_STAT_HITS, n[PUMA_GET_HIT]);
	puma_count_n(PUMA_STAT_HITS_LARGE, n[PUMA_GET_HIT_LARGE]);
	puma_count_n(PUMA_STAT_MISSES, n[PUMA_GET_MISS]);
	puma_count_n(PUMA_STAT_GET_STALE, n[PUMA_GET_STALE]);
	puma_index_count_gets(inode, n[PUMA_GET_HIT], n[PUMA_GET_MISS],
			      n[PUMA_GET_STALE]);
}

/*
 * Open pages @i .. @i + @nr - 1 of @req, the pages of one folio, and
 * count each in @n.  The folio may be marked up to date only if every
 * page of it opened and nothing invalidated it since the get: a page
 * that did is counted a hit only then, else a miss (the disk reads it
 * with the rest of its folio).
 */
static bool puma_open_folio(struct inode *inode, int peer, bool answered,
			    struct puma_get_req *req, unsigned int i,
			    unsigned int nr, unsigned long seq, unsigned int *n)
{
	unsigned int end = i + nr, good = 0;

	for (; i < end; i++) {
		if (!(req->hits & BIT(i))) {
			n[PUMA_GET_MISS]++;
			if (answered)	/* the lender has none */
				puma_index_forget_missed(inode, req->index[i],
							 peer);
		} else if (!puma_open_page(req->seal, &req->fkey,
					   req->index[i], req->version[i],
					   req->page[i], req->tag[i])) {
			/* A bad blob: a miss; forget the lender's copy */
			n[PUMA_GET_MISS]++;
			puma_index_forget_bad(inode, req->index[i], peer);
		} else if (!puma_index_still_valid(inode, req->index[i],
						   &req->fkey, seq)) {
			n[PUMA_GET_STALE]++;
		} else {
			good++;
		}
	}
	if (good == nr) {
		n[PUMA_GET_HIT] += good;
		if (nr > 1)
			n[PUMA_GET_HIT_LARGE] += good;
		return true;
	}
	n[PUMA_GET_MISS] += good;
	return false;
}

/*
 * Ask lender @peer for the pages of @req (of folios locked, not uptodate,
 * in the page cache); fill the folios it returned whole, read the rest
 * from disk.
 */
static void puma_get_folios(struct file *file, struct inode *inode, int peer,
			    struct puma_get_req *req, unsigned long seq)
{
	const struct address_space_operations *aops = inode->i_mapping->a_ops;
	unsigned int i, nr, n[PUMA_GET_NR] = { };
	bool answered;

	if (puma_cfg.exclusive)
		for (i = 0; i < req->count; i++)
			puma_index_forget(inode, req->index[i]);
	answered = !puma_peer_get(peer, req);
	if (!answered)
		req->hits = 0;
	for (i = 0; i < req->count; i += nr) {
		struct folio *folio = page_folio(req->page[i]);

		nr = folio_nr_pages(folio);
		if (puma_open_folio(inode, peer, answered, req, i, nr, seq,
				    n)) {
			folio_mark_uptodate(folio);
			folio_unlock(folio);
		} else {
			aops->read_folio(file, folio);
		}
	}
	puma_count_gets(inode, n);
}

/*
 * The lender of all @nr pages from @index, if one lender holds them all
 * under the same file key and invalidation count, else 0; their versions
 * in @version (@nr entries, or NULL).
 */
static int puma_lookup_run(struct inode *inode, pgoff_t index,
			   unsigned long nr, struct puma_fkey *fk,
			   unsigned long *seq, u64 *version)
{
	struct puma_fkey pfk;
	unsigned long k, s;
	int peer, p;
	u64 v;

	if (nr > PUMA_BATCH_MAX)
		return 0;
	peer = puma_index_lookup(inode, index, fk, seq, version ?: &v);
	for (k = 1; peer && k < nr; k++) {
		p = puma_index_lookup(inode, index + k, &pfk, &s,
				      version ? &version[k] : &v);
		if (p != peer || s != *seq || memcmp(&pfk, fk, sizeof(pfk)))
			return 0;
	}
	return peer;
}

static struct puma_get_req *puma_req_alloc(void)
{
	struct puma_get_req *req = kzalloc(sizeof(*req), GFP_NOIO);

	if (!req)
		return NULL;
	req->seal = puma_seal_ctx_alloc(GFP_NOIO);
	if (!req->seal) {
		kfree(req);
		return NULL;
	}
	init_completion(&req->done);
	return req;
}

static void puma_req_free(struct puma_get_req *req)
{
	if (!req)
		return;
	puma_seal_ctx_free(req->seal);
	kfree(req);
}

/*
 * A folio larger than one GET (XFS with a readahead window above
 * PUMA_BATCH_MAX pages): asked for in GETs of PUMA_BATCH_MAX pages, one
 * after the other, all to the lender that holds the first, under the same
 * file key and invalidation count.  The folio is marked up to date only
 * if every page of every GET opened; at the first that does not (or a
 * lender change in the index), the caller reads the whole folio from the
 * disk.  Return: true if the folio is filled and unlocked.
 */
static bool puma_get_big(struct inode *inode, struct folio *folio)
{
	unsigned int nr = folio_nr_pages(folio), off, cnt, k, good = 0;
	unsigned int n[PUMA_GET_NR] = { }, part[PUMA_GET_NR];
	u64 version[PUMA_BATCH_MAX];
	struct puma_get_req *req = NULL;
	unsigned long seq = 0, s;
	struct puma_fkey fk, cfk;
	bool ok = true, answered;
	int peer = 0, p;

	for (off = 0; ok && off < nr; off += cnt) {
		cnt = min_t(unsigned int, nr - off, PUMA_BATCH_MAX);
		p = puma_lookup_run(inode, folio->index + off, cnt, &cfk, &s,
				    version);
		if (!p || (off && (p != peer || s != seq ||
				   memcmp(&cfk, &fk, sizeof(fk))))) {
			ok = false;
			break;
		}
		if (!req) {
			req = puma_req_alloc();
			if (!req)
				return false;
		}
		peer = p;
		seq = s;
		fk = cfk;
		req->fkey = fk;
		req->count = cnt;
		req->error = 0;
		reinit_completion(&req->done);
		for (k = 0; k < cnt; k++) {
			req->index[k] = folio->index + off + k;
			req->version[k] = version[k];
			req->page[k] = folio_page(folio, off + k);
			if (puma_cfg.exclusive)
				puma_index_forget(inode, req->index[k]);
		}
		puma_count_n(PUMA_STAT_GETS, cnt);
		answered = !puma_peer_get(peer, req);
		if (!answered)
			req->hits = 0;
		memset(part, 0, sizeof(part));
		ok = puma_open_folio(inode, peer, answered, req, 0, cnt, seq,
				     part);
		n[PUMA_GET_MISS] += part[PUMA_GET_MISS];
		n[PUMA_GET_STALE] += part[PUMA_GET_STALE];
		if (ok)
			good += cnt;
	}
	puma_req_free(req);
	if (ok) {
		n[PUMA_GET_HIT] += good;
		n[PUMA_GET_HIT_LARGE] += good;
	} else {
		/* What opened is read again from the disk with the rest. */
		n[PUMA_GET_MISS] += good;
	}
	puma_count_gets(inode, n);
	if (!ok)
		return false;
	folio_mark_uptodate(folio);
	folio_unlock(folio);
	return true;
}

/* Does one lender hold the first GET's worth of the large folio @folio? */
static bool puma_big_held(struct inode *inode, struct folio *folio)
{
	struct puma_fkey fk;
	unsigned long seq;

	return puma_rtt_allows_get() &&
	       puma_lookup_run(inode, folio->index, PUMA_BATCH_MAX, &fk, &seq,
			       NULL);
}

/* Split @rac into runs: remote ones by GET, the others by ->readahead. */
static void puma_read_split(struct readahead_control *rac,
			    struct inode *inode)
{
	struct address_space *mapping = rac->mapping;
	struct puma_get_req *req = NULL;
	u64 version[PUMA_BATCH_MAX];
	struct puma_fkey fk = { };
	unsigned long seq = 0;

	for (puma_rac_settle(rac); rac->_nr_pages; puma_rac_settle(rac)) {
		pgoff_t start = rac->_index;
		unsigned long n = 0;
		int peer = 0, p;
		bool big = false;

		while (n < rac->_nr_pages) {
			struct folio *folio = xa_load(&mapping->i_pages,
						      start + n);
			unsigned long nr, fseq = 0;
			struct puma_fkey ffk = { };

			if (!folio || xa_is_value(folio))
				break;
			nr = folio_nr_pages(folio);
			if (nr > PUMA_BATCH_MAX && puma_big_held(inode, folio)) {
				/* Alone, by puma_get_big(), after this run */
				big = !n;
				break;
			}
			/* A remote run is of whole folios, 32 pages at most */
			if (peer && n + nr > PUMA_BATCH_MAX)
				break;
			p = 0;
			if (puma_rtt_allows_get())
				p = puma_lookup_run(inode, start + n, nr, &ffk,
						    &fseq,
						    n + nr <= PUMA_BATCH_MAX ?
						    &version[n] : NULL);
			if (n == 0) {
				peer = p;
				seq = fseq;
				fk = ffk;
			} else if (p != peer || (peer && (fseq != seq ||
				   memcmp(&ffk, &fk, sizeof(fk))))) {
				break;
			}
			n += nr;
		}
		if (big) {
			struct folio *folio = readahead_folio(rac);

			if (!puma_get_big(inode, folio))
				mapping->a_ops->read_folio(rac->file, folio);
			continue;
		}
		if (!n)
			n = 1;	/* cannot happen; keep moving */
		if (peer && !req)
			req = puma_req_alloc();
		if (!peer || !req) {
			struct readahead_control sub = *rac;

			sub._nr_pages = n;
			sub._batch_count = 0;
			puma_read_local(&sub);
			rac->_index += n;
			rac->_nr_pages -= n;
			continue;
		}
		req->count = 0;
		req->hits = 0;
		req->error = 0;
		req->fkey = fk;
		reinit_completion(&req->done);
		while (req->count < n) {
			struct folio *folio = readahead_folio(rac);
			unsigned long k;

			for (k = 0; k < folio_nr_pages(folio); k++) {
				req->index[req->count] = folio->index + k;
				req->version[req->count] = version[req->count];
				req->page[req->count++] = folio_page(folio, k);
			}
		}
		puma_count_n(PUMA_STAT_GETS, req->count);
		puma_get_folios(rac->file, inode, peer, req, seq);
	}
	puma_req_free(req);
}

static void puma_read_pages(struct readahead_control *rac)
{
	struct inode *inode = rac->mapping->host;
	struct blk_plug plug;

	if (!readahead_count(rac))
		goto out;
	if (unlikely(rac->_workingset))
		psi_memstall_enter(&rac->_pflags);
	blk_start_plug(&plug);

	if (puma_get_wanted(inode)) {
		if (puma_cfg.seq_filter && rac->ra && rac->ra->ra_pages &&
		    rac->ra->size >= rac->ra->ra_pages)
			puma_index_mark_sequential(inode, rac->_index,
						   readahead_count(rac));
		puma_read_split(rac, inode);
	} else {
		puma_read_local(rac);
	}

	blk_finish_plug(&plug);
	if (unlikely(rac->_workingset))
		psi_memstall_leave(&rac->_pflags);
	rac->_workingset = false;
	WARN_ON_ONCE(readahead_count(rac));
out:
	atomic_dec(&puma_get_inflight);
}

/* One folio from a lender, if the index says one holds all of it. */
static bool puma_get_one(struct file *file, filler_t filler,
			 struct folio *folio)
{
	struct address_space *mapping = folio->mapping;
	unsigned int k, nr, n[PUMA_GET_NR] = { };
	u64 version[PUMA_BATCH_MAX];
	struct puma_get_req *req;
	struct puma_fkey fk;
	unsigned long seq;
	bool answered, hit;
	int peer;

	if (!mapping || filler != mapping->a_ops->read_folio ||
	    !puma_get_wanted(mapping->host) || !puma_rtt_allows_get())
		return false;
	nr = folio_nr_pages(folio);
	if (nr > PUMA_BATCH_MAX)
		return puma_get_big(mapping->host, folio);
	/* One walk of the index, before anything is allocated for a miss */
	peer = puma_lookup_run(mapping->host, folio->index, nr, &fk, &seq,
			       version);
	if (!peer)
		return false;
	req = puma_req_alloc();
	if (!req)
		return false;
	req->fkey = fk;
	req->count = nr;
	for (k = 0; k < nr; k++) {
		req->index[k] = folio->index + k;
		req->version[k] = version[k];
		req->page[k] = folio_page(folio, k);
		if (puma_cfg.exclusive)
			puma_index_forget(mapping->host, req->index[k]);
	}
	puma_count_n(PUMA_STAT_GETS, nr);
	answered = !puma_peer_get(peer, req);
	if (!answered)
		req->hits = 0;
	hit = puma_open_folio(mapping->host, peer, answered, req, 0, nr, seq,
			      n);
	puma_req_free(req);
	puma_count_gets(mapping->host, n);
	if (!hit)
		return false;
	folio_mark_uptodate(folio);
	folio_unlock(folio);
	return true;
}

static int puma_filemap_read_folio(struct file *file, filler_t filler,
				   struct folio *folio)
{
	bool workingset = folio_test_workingset(folio);
	unsigned long pflags;
	int error = 0;

	if (puma_get_one(file, filler, folio))
		goto out;
	puma_folio_clear_error(folio);
	if (unlikely(workingset))
		psi_memstall_enter(&pflags);
	error = filler(file, folio);
	if (unlikely(workingset))
		psi_memstall_leave(&pflags);
	if (error)
		goto out;
	error = folio_wait_locked_killable(folio);
	if (error)
		goto out;
	if (folio_test_uptodate(folio))
		goto out;
	if (file)
		file->f_ra.ra_pages /= 4;
	error = -EIO;
out:
	atomic_dec(&puma_get_inflight);
	return error;
}

struct puma_redirect {
	const char *name;
	unsigned long target;
	unsigned long addr;
	struct ftrace_ops ops;
	bool registered;
};

static void notrace puma_ftrace_redirect(unsigned long ip,
					 unsigned long parent_ip,
					 struct ftrace_ops *op,
					 struct ftrace_regs *fregs)
{
	struct puma_redirect *r = container_of(op, struct puma_redirect, ops);

	if (READ_ONCE(puma_get_stopping))
		return;
	atomic_inc(&puma_get_inflight);
	puma_ftrace_set_ip(fregs, r->target);
}

#define PUMA_REDIRECT(fn, repl) {					\
	.name = #fn,							\
	.target = (unsigned long)(repl),				\
	.ops = {							\
		.func = puma_ftrace_redirect,				\
		.flags = FTRACE_OPS_FL_SAVE_REGS |			\
			 FTRACE_OPS_FL_IPMODIFY |			\
			 FTRACE_OPS_FL_RECURSION,			\
	},								\
}

/* In the order puma_readpath_check() takes them */
static struct puma_redirect puma_redirects[] = {
	PUMA_REDIRECT(read_pages, puma_read_pages),
	PUMA_REDIRECT(filemap_read_folio, puma_filemap_read_folio),
};

/* The traced address of a vmlinux function, by name, without kallsyms. */
static int puma_resolve(const char *name, unsigned long *addr)
{
	struct kprobe kp = { .symbol_name = name };
	int ret;

	ret = register_kprobe(&kp);
	if (ret)
		return ret;
	*addr = (unsigned long)kp.addr;
	unregister_kprobe(&kp);
	return 0;
}

static void puma_get_unregister(void)
{
	unsigned int i;

	WRITE_ONCE(puma_get_stopping, true);
	for (i = 0; i < ARRAY_SIZE(puma_redirects); i++) {
		struct puma_redirect *r = &puma_redirects[i];

		if (!r->registered)
			continue;
		unregister_ftrace_function(&r->ops);
		ftrace_set_filter_ip(&r->ops, r->addr, 1, 0);
		r->registered = false;
	}
	while (atomic_read(&puma_get_inflight))
		msleep(20);
	/* Tasks may still be on the last instructions of our functions. */
	synchronize_rcu_tasks();
}

int puma_get_init(void)
{
	unsigned int i;
	int ret;

	/* req->hits, like a GET reply's, has a bit per page of a batch */
	BUILD_BUG_ON(sizeof_field(struct puma_get_req, hits) * BITS_PER_BYTE <
		     PUMA_BATCH_MAX);

	for (i = 0; i < ARRAY_SIZE(puma_redirects); i++) {
		struct puma_redirect *r = &puma_redirects[i];

		ret = puma_resolve(r->name, &r->addr);
		if (ret) {
			pr_err("cannot find %s: %d\n", r->name, ret);
			return ret;
		}
	}
	/* Our copies replace these functions only where they were reviewed */
	ret = puma_readpath_check(puma_redirects[0].addr,
				  puma_redirects[1].addr);
	if (ret)
		return ret;
	for (i = 0; i < ARRAY_SIZE(puma_redirects); i++) {
		struct puma_redirect *r = &puma_redirects[i];

		ret = ftrace_set_filter_ip(&r->ops, r->addr, 0, 0);
		if (ret) {
			pr_err("ftrace filter %s: %d\n", r->name, ret);
			goto out_unregister;
		}
		ret = register_ftrace_function(&r->ops);
		if (ret) {
			pr_err("ftrace redirect %s: %d\n", r->name, ret);
			ftrace_set_filter_ip(&r->ops, r->addr, 1, 0);
			goto out_unregister;
		}
		r->registered = true;
	}
	return 0;

out_unregister:
	puma_get_unregister();
	return ret;
}

void puma_get_exit(void)
{
	puma_get_unregister();
}
