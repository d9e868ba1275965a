// SPDX-License-Identifier: GPL-2.0
/*
 * Event hooks: where the kernel tells us a page leaves the page cache or a
 * file's content changes.
 *
 * A stock Debian kernel has no cleancache, so the events are observed from
 * the outside, with only interfaces that are safe under Intel IBT (the
 * 6.12 kernel seals the ENDBR of functions whose address is never taken;
 * calling one through a pointer is fatal): tracepoint probes found with
 * for_each_kernel_tracepoint(), and kprobes placed by symbol name.  Neither
 * calls a kernel function through a pointer; the kernel calls ours.
 *
 *   put        tracepoint mm_filemap_delete_from_page_cache with the folio
 *              refcount frozen at 0, i.e. coming from __remove_mapping()
 *              (reclaim, drop_caches); the data is copied right there,
 *              with interrupts off, into preallocated buffers, one per
 *              page of the folio
 *   dirty      tracepoint writeback_dirty_folio (clean -> dirty)
 *   truncate   kretprobe truncate_inode_pages_range: entry invalidates
 *              the range and vetoes puts of the mapping until the exit;
 *              also covers hole punch and inode eviction
 *              (truncate_inode_pages_final)
 *   DIO write  kprobe invalidate_inode_pages2_range (before the write)
 *              and kiocb_invalidate_post_direct_write (after it; the
 *              kernel skips its own invalidation when nrpages is 0)
 *   umount     kprobe generic_shutdown_super; and a kretprobe on it, since
 *              reclaim may put pages of its inodes after the entry, until
 *              it evicts them, which creates the pool again: the return
 *              drops the pool once more, with no inode left
 *
 * Implementation: puma_tps and puma_kps list what is registered; a
 * registration failure unloads the lot and fails the module load, since a
 * missing invalidation hook would break the never-stale rule.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/highmem.h>
#include <linux/kprobes.h>
#include <linux/mm.h>
#include <linux/pagemap.h>
#include <linux/tracepoint.h>

#include "puma.h"

/*
 * Put: a folio leaves the page cache; refcount 0 means reclaim.  A large
 * folio is put page by page if the put buffers can take all of it: a get
 * fills a folio only when every page of it comes back (in several GETs
 * above PUMA_BATCH_MAX pages).
 */
static void puma_tp_delete(void *data, struct folio *folio)
{
	struct address_space *mapping = folio->mapping;
	pgoff_t index = folio->index, eof;
	bool large = folio_test_large(folio);
	struct inode *inode;
	unsigned long nr;
	void *kaddr;

	if (!READ_ONCE(puma_cfg.borrower) || !mapping)
		return;
	if (folio_ref_count(folio) != 0)
		return;	/* truncate/invalidate: the truncate hook saw it */
	inode = mapping->host;
	if (!inode || !puma_inode_eligible(inode))
		return;
	nr = folio_nr_pages(folio);
	if (!folio_test_uptodate(folio) || folio_test_dirty(folio))
		goto not_put;
	if (large && puma_put_buffers_free() < nr) {
		puma_count_n(PUMA_STAT_DROP_NO_BUFFER, nr);
		goto not_put;
	}
	eof = DIV_ROUND_UP(i_size_read(inode), PAGE_SIZE);
	for (; nr && index < eof; nr--, index++) {
		kaddr = kmap_local_folio(folio, (index - folio->index) <<
					 PAGE_SHIFT);
		puma_index_put_page(inode, mapping, index, kaddr, large);
		kunmap_local(kaddr);
	}
	if (!nr)
		return;
not_put:
	/* Not put: the marks of these pages have no use any more */
	puma_index_evicted(inode, index, nr);
}

/* A folio becomes dirty: its remote copy is stale from now on. */
static void puma_tp_dirty(void *data, struct folio *folio,
			  struct address_space *mapping)
{
	if (!mapping || !mapping->host)
		return;
	puma_index_inval(mapping->host, folio->index,
			 folio->index + folio_nr_pages(folio) - 1);
}

struct puma_tp {
	const char *name;
	void *probe;
	struct tracepoint *tp;
};

static struct puma_tp puma_tps[] = {
	{ .name = "mm_filemap_delete_from_page_cache",
	  .probe = puma_tp_delete },
	{ .name = "writeback_dirty_folio", .probe = puma_tp_dirty },
};

static void puma_tp_match(struct tracepoint *tp, void *priv)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(puma_tps); i++)
		if (!strcmp(tp->name, puma_tps[i].name))
			puma_tps[i].tp = tp;
}

static pgoff_t puma_lend_to_index(loff_t lend)
{
	return lend < 0 ? ULONG_MAX : (pgoff_t)(lend >> PAGE_SHIFT);
}

/* truncate_inode_pages_range(mapping, lstart, lend) */
struct puma_trunc_data {
	struct address_space *mapping;
};

static int puma_trunc_entry(struct kretprobe_instance *ri,
			    struct pt_regs *regs)
{
	struct puma_trunc_data *d = (void *)ri->data;
	struct address_space *mapping = (void *)regs->di;
	loff_t lstart = regs->si, lend = regs->dx;

	d->mapping = NULL;
	if (!mapping->host || !puma_inode_eligible(mapping->host))
		return 1;	/* no return probe needed */
	d->mapping = mapping;
	puma_truncate_begin(mapping);
	puma_index_inval(mapping->host, lstart >> PAGE_SHIFT,
			 puma_lend_to_index(lend));
	return 0;
}

static int puma_trunc_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct puma_trunc_data *d = (void *)ri->data;

	if (d->mapping)
		puma_truncate_end(d->mapping);
	return 0;
}

static struct kretprobe puma_trunc_rp = {
	.kp.symbol_name = "truncate_inode_pages_range",
	.entry_handler = puma_trunc_entry,
	.handler = puma_trunc_ret,
	.data_size = sizeof(struct puma_trunc_data),
	.maxactive = 512,
};

/*
 * The same entry without a return probe: if the kretprobe ran out of
 * instances, this one still invalidates, and the miss turns puts off.
 */
static int puma_trunc_pre(struct kprobe *kp, struct pt_regs *regs)
{
	struct address_space *mapping = (void *)regs->di;
	loff_t lstart = regs->si, lend = regs->dx;

	if (unlikely(READ_ONCE(puma_trunc_rp.nmissed)))
		puma_index_puts_off();
	if (mapping->host)
		puma_index_inval(mapping->host, lstart >> PAGE_SHIFT,
				 puma_lend_to_index(lend));
	return 0;
}

/* invalidate_inode_pages2_range(mapping, start, end) */
static int puma_inv2_pre(struct kprobe *kp, struct pt_regs *regs)
{
	struct address_space *mapping = (void *)regs->di;

	if (mapping->host)
		puma_index_inval(mapping->host, regs->si, regs->dx);
	return 0;
}

/* kiocb_invalidate_post_direct_write(iocb, count) */
static int puma_dio_post_pre(struct kprobe *kp, struct pt_regs *regs)
{
	struct kiocb *iocb = (void *)regs->di;
	size_t count = regs->si;
	struct inode *inode = iocb->ki_filp->f_mapping->host;
	loff_t pos = iocb->ki_pos;

	if (!inode || !count)
		return 0;
	puma_index_inval(inode, pos >> PAGE_SHIFT,
			 (pos + count - 1) >> PAGE_SHIFT);
	return 0;
}

/* generic_shutdown_super(sb) */
static int puma_umount_pre(struct kprobe *kp, struct pt_regs *regs)
{
	puma_index_drop_sb((struct super_block *)regs->di);
	return 0;
}

/* The same function's return: forget what puts made after the entry. */
struct puma_umount_data {
	struct super_block *sb;
};

static int puma_umount_entry(struct kretprobe_instance *ri,
			     struct pt_regs *regs)
{
	struct puma_umount_data *d = (void *)ri->data;

	d->sb = (struct super_block *)regs->di;
	return 0;
}

static int puma_umount_ret(struct kretprobe_instance *ri,
			   struct pt_regs *regs)
{
	struct puma_umount_data *d = (void *)ri->data;

	puma_index_drop_sb(d->sb);
	return 0;
}

static struct kretprobe puma_umount_rp = {
	.kp.symbol_name = "generic_shutdown_super",
	.entry_handler = puma_umount_entry,
	.handler = puma_umount_ret,
	.data_size = sizeof(struct puma_umount_data),
	.maxactive = 64,
};

static struct kprobe puma_kps[] = {
	{ .symbol_name = "truncate_inode_pages_range",
	  .pre_handler = puma_trunc_pre },
	{ .symbol_name = "invalidate_inode_pages2_range",
	  .pre_handler = puma_inv2_pre },
	{ .symbol_name = "kiocb_invalidate_post_direct_write",
	  .pre_handler = puma_dio_post_pre },
	{ .symbol_name = "generic_shutdown_super",
	  .pre_handler = puma_umount_pre },
};

static void puma_tps_unregister(unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		tracepoint_probe_unregister(puma_tps[i].tp, puma_tps[i].probe,
					    NULL);
	tracepoint_synchronize_unregister();
}

static void puma_kps_unregister(unsigned int n)
{
	while (n--)
		unregister_kprobe(&puma_kps[n]);
}

int puma_hooks_init(void)
{
	unsigned int i, k;
	int ret;

	/* Invalidation hooks first: no put may be taken before them. */
	for (k = 0; k < ARRAY_SIZE(puma_kps); k++) {
		ret = register_kprobe(&puma_kps[k]);
		if (ret) {
			pr_err("kprobe %s: %d\n", puma_kps[k].symbol_name, ret);
			goto out_kps;
		}
	}
	ret = register_kretprobe(&puma_trunc_rp);
	if (ret) {
		pr_err("kretprobe %s: %d\n", puma_trunc_rp.kp.symbol_name, ret);
		goto out_kps;
	}
	ret = register_kretprobe(&puma_umount_rp);
	if (ret) {
		pr_err("kretprobe %s: %d\n", puma_umount_rp.kp.symbol_name,
		       ret);
		goto out_trunc_rp;
	}

	for_each_kernel_tracepoint(puma_tp_match, NULL);
	/* The dirty hook before the put hook, for the same reason. */
	for (i = ARRAY_SIZE(puma_tps); i--; ) {
		if (!puma_tps[i].tp) {
			pr_err("tracepoint %s not found\n", puma_tps[i].name);
			ret = -ENOENT;
			goto out_tps;
		}
		ret = tracepoint_probe_register(puma_tps[i].tp,
						puma_tps[i].probe, NULL);
		if (ret) {
			pr_err("tracepoint %s: %d\n", puma_tps[i].name, ret);
			goto out_tps;
		}
	}
	return 0;

out_tps:
	while (++i < ARRAY_SIZE(puma_tps))
		tracepoint_probe_unregister(puma_tps[i].tp, puma_tps[i].probe,
					    NULL);
	tracepoint_synchronize_unregister();
	unregister_kretprobe(&puma_umount_rp);
out_trunc_rp:
	unregister_kretprobe(&puma_trunc_rp);
out_kps:
	puma_kps_unregister(k);
	return ret;
}

void puma_hooks_exit(void)
{
	/* Puts stop first, invalidations last. */
	puma_tps_unregister(ARRAY_SIZE(puma_tps));
	unregister_kretprobe(&puma_umount_rp);
	unregister_kretprobe(&puma_trunc_rp);
	puma_kps_unregister(ARRAY_SIZE(puma_kps));
}
