/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The differences between the Debian 6.1 and 6.12 kernels that the module
 * meets, in one place, so that no other file tests a kernel version.
 */
#ifndef PUMA_COMPAT_H
#define PUMA_COMPAT_H

#include <linux/fs.h>
#include <linux/ftrace.h>
#include <linux/page-flags.h>
#include <linux/sched.h>
#include <linux/shrinker.h>
#include <linux/swap.h>
#include <linux/version.h>
#include <net/sock.h>

/* Where an IPMODIFY ftrace callback makes the traced function return. */
static inline void puma_ftrace_set_ip(struct ftrace_regs *fregs,
				      unsigned long ip)
{
#ifdef ftrace_regs_set_instruction_pointer
	ftrace_regs_set_instruction_pointer(fregs, ip);
#else
	ftrace_instruction_pointer_set(fregs, ip);
#endif
}

/* 6.1's filemap_read_folio() clears PG_error first; 6.12 has no PG_error. */
static inline void puma_folio_clear_error(struct folio *folio)
{
#if KERNEL_VERSION(6, 12, 0) > LINUX_VERSION_CODE
	folio_clear_error(folio);
#endif
}

/* Since 6.2 sockets may use current->task_frag; ours must not. */
static inline void puma_sock_no_task_frag(struct sock *sk)
{
#if KERNEL_VERSION(6, 2, 0) <= LINUX_VERSION_CODE
	sk->sk_use_task_frag = false;
#endif
}

/* Credit pages a shrinker freed to the reclaim that called it. */
static inline void puma_account_reclaimed(unsigned long pages)
{
#if KERNEL_VERSION(6, 5, 0) <= LINUX_VERSION_CODE
	mm_account_reclaimed_pages(pages);
#else
	if (current->reclaim_state)
		current->reclaim_state->reclaimed_slab += pages;
#endif
}

/* The data change time stamps of @inode; 6.7 put them behind accessors. */
static inline void puma_inode_times(struct inode *inode,
				    struct timespec64 *mtime,
				    struct timespec64 *ctime)
{
#if KERNEL_VERSION(6, 7, 0) <= LINUX_VERSION_CODE
	*mtime = inode_get_mtime(inode);
	*ctime = inode_get_ctime(inode);
#else
	*mtime = inode->i_mtime;
	*ctime = inode->i_ctime;
#endif
}

/* shrinker_alloc() replaced register_shrinker() in 6.7. */
#if KERNEL_VERSION(6, 7, 0) <= LINUX_VERSION_CODE
static inline struct shrinker *
puma_shrinker_create(const char *name,
		     unsigned long (*count)(struct shrinker *,
					    struct shrink_control *),
		     unsigned long (*scan)(struct shrinker *,
					   struct shrink_control *))
{
	struct shrinker *sh = shrinker_alloc(0, "%s", name);

	if (!sh)
		return NULL;
	sh->count_objects = count;
	sh->scan_objects = scan;
	sh->seeks = 1;
	shrinker_register(sh);
	return sh;
}

static inline void puma_shrinker_destroy(struct shrinker *sh)
{
	shrinker_free(sh);
}
#else
static inline struct shrinker *
puma_shrinker_create(const char *name,
		     unsigned long (*count)(struct shrinker *,
					    struct shrink_control *),
		     unsigned long (*scan)(struct shrinker *,
					   struct shrink_control *))
{
	struct shrinker *sh = kzalloc(sizeof(*sh), GFP_KERNEL);

	if (!sh)
		return NULL;
	sh->count_objects = count;
	sh->scan_objects = scan;
	sh->seeks = 1;
	if (register_shrinker(sh, "%s", name)) {
		kfree(sh);
		return NULL;
	}
	return sh;
}

static inline void puma_shrinker_destroy(struct shrinker *sh)
{
	unregister_shrinker(sh);
	kfree(sh);
}
#endif

#endif /* PUMA_COMPAT_H */
