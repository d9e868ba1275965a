// SPDX-License-Identifier: GPL-2.0
/*
 * Which kernels the rewritten read path (get.c) may run on.
 *
 * get.c replaces read_pages() and filemap_read_folio() with full copies
 * of their bodies, reviewed against the kernels listed in
 * puma_readpath_reviewed[].  On any other kernel the copy could miss a
 * change of the original (a new flag, lock or accounting step), so the
 * module refuses to load rather than run it.
 *
 * A kernel is recognised by the size of each of the two functions, as
 * kallsyms has it (sprint_symbol()): a change to either function, or to
 * a static helper the compiler inlined into it, almost always changes
 * its size, while a rebuild of the same source (another Debian upload
 * with an unchanged mm/) keeps it.  The sizes do not depend on where
 * the kernel is loaded, nor on code patched at run time.  They are a
 * guard, not a proof: functions are 16-byte aligned, so a change that
 * keeps the size within its alignment goes unnoticed.
 *
 * An operator who reviewed the read path of another kernel gives its
 * sizes with the readpath_reviewed parameter, which replaces the list:
 * "read_pages=0x1d0,filemap_read_folio=0x160".  /sys/kernel/puma/readpath
 * shows the running kernel's sizes.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kallsyms.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/string.h>
#include <linux/utsname.h>

#include "puma.h"

struct puma_readpath {
	const char *kernel;		/* where the sizes were read */
	unsigned long read_pages;
	unsigned long filemap_read_folio;
};

/*
 * Read from /proc/kallsyms (the distance to the next symbol).  Both
 * kernels, reviewed separately, happen to have the same sizes.
 */
static const struct puma_readpath puma_readpath_reviewed[] = {
	{ "Debian 6.1.192-2 (6.1.0-56-amd64)", 0x260, 0xd0 },
	{ "Debian 6.12.95-1~bpo12+1 (6.12.95+deb12-amd64)", 0x260, 0xd0 },
};

static char *readpath_reviewed;
module_param(readpath_reviewed, charp, 0444);
MODULE_PARM_DESC(readpath_reviewed,
		 "read_pages=SIZE,filemap_read_folio=SIZE of a reviewed kernel (replaces the built-in list)");

static struct puma_readpath puma_readpath_running = {
	.kernel = "running kernel",
};

/* The size of the function at @addr, as kallsyms knows it; 0 if none. */
static unsigned long puma_symbol_size(unsigned long addr)
{
	char buf[KSYM_SYMBOL_LEN];
	unsigned long size;
	char *slash;

	sprint_symbol(buf, addr);
	slash = strrchr(buf, '/');
	if (!slash || sscanf(slash + 1, "%lx", &size) != 1)
		return 0;
	return size;
}

/* "read_pages=SIZE,filemap_read_folio=SIZE" into @rp. */
static int puma_readpath_parse(const char *spec, struct puma_readpath *rp)
{
	char *s, *p, *tok;
	int ret = 0;

	s = kstrdup(spec, GFP_KERNEL);
	if (!s)
		return -ENOMEM;
	p = s;
	rp->kernel = "readpath_reviewed";
	while ((tok = strsep(&p, ",")) && !ret) {
		char *val = strchr(tok, '=');
		unsigned long *field;

		if (!val) {
			ret = -EINVAL;
			break;
		}
		*val++ = '\0';
		if (!strcmp(tok, "read_pages"))
			field = &rp->read_pages;
		else if (!strcmp(tok, "filemap_read_folio"))
			field = &rp->filemap_read_folio;
		else
			field = NULL;
		if (!field || kstrtoul(val, 0, field))
			ret = -EINVAL;
	}
	kfree(s);
	if (!ret && (!rp->read_pages || !rp->filemap_read_folio))
		ret = -EINVAL;
	return ret;
}

static bool puma_readpath_same(const struct puma_readpath *a,
			       const struct puma_readpath *b)
{
	return a->read_pages == b->read_pages &&
	       a->filemap_read_folio == b->filemap_read_folio;
}

/**
 * puma_readpath_check - may get.c's copies replace the running functions
 * @read_pages: address of the running kernel's read_pages()
 * @filemap_read_folio: address of its filemap_read_folio()
 *
 * Return: 0 if the running kernel is one whose read path was reviewed,
 * -EPERM (with the reason logged) if not, -EINVAL for a malformed
 * readpath_reviewed parameter.
 */
int puma_readpath_check(unsigned long read_pages,
			unsigned long filemap_read_folio)
{
	struct puma_readpath *run = &puma_readpath_running;
	struct puma_readpath given = { };
	unsigned int i;
	int ret;

	run->read_pages = puma_symbol_size(read_pages);
	run->filemap_read_folio = puma_symbol_size(filemap_read_folio);
	if (readpath_reviewed) {
		ret = puma_readpath_parse(readpath_reviewed, &given);
		if (ret) {
			pr_err("readpath_reviewed=%s: expected read_pages=SIZE,filemap_read_folio=SIZE\n",
			       readpath_reviewed);
			return ret;
		}
		if (puma_readpath_same(run, &given))
			return 0;
	} else {
		for (i = 0; i < ARRAY_SIZE(puma_readpath_reviewed); i++)
			if (puma_readpath_same(run, &puma_readpath_reviewed[i]))
				return 0;
	}
	pr_err("kernel %s %s: read_pages (size %#lx) and filemap_read_folio (size %#lx) are not those puma's read path was reviewed against%s; refusing to load (see \"Kernels\" in docs/puma.md)\n",
	       init_utsname()->release, init_utsname()->version,
	       run->read_pages, run->filemap_read_folio,
	       readpath_reviewed ? " (readpath_reviewed)" : "");
	return -EPERM;
}

ssize_t puma_readpath_show(char *buf)
{
	return sysfs_emit(buf, "read_pages=%#lx,filemap_read_folio=%#lx\n",
			  puma_readpath_running.read_pages,
			  puma_readpath_running.filemap_read_folio);
}
