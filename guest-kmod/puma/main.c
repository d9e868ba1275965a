// SPDX-License-Identifier: GPL-2.0
/*
 * Puma guest module: entry point.
 *
 * Puma turns the free memory of idle guests into a remote page cache for
 * active guests (see docs/puma.md).  This file only holds the module life
 * cycle and the sysfs root, /sys/kernel/puma, under which control.c
 * registers the knobs and counters.
 *
 * Load order: the borrower index and lender store, the policies, the
 * transport, then the invalidation and put hooks, then the get redirect,
 * then the control files; unload goes the other way, so that no get is
 * served after the hooks that keep the index right are gone, and no
 * connection outlives the module.  The module starts with every role off;
 * the page sealing key is drawn with the borrower role (seal.c) and
 * dropped after the transport at unload.
 *
 * Implementation: puma_kobj is created at load and removed at unload.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <generated/utsrelease.h>
#include <linux/init.h>
#include <linux/kobject.h>
#include <linux/module.h>
#include <linux/sysfs.h>

#include "puma.h"

struct kobject *puma_kobj;

/* The kernel release this module was built for, to check a guest's load. */
static ssize_t build_release_show(struct kobject *kobj,
				  struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%s\n", UTS_RELEASE);
}

static struct kobj_attribute build_release_attr = __ATTR_RO(build_release);

static ssize_t version_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	return sysfs_emit(buf, "%s\n", PUMA_VERSION);
}

static struct kobj_attribute version_attr = __ATTR_RO(version);

/* The running kernel's read-path sizes (readpath.c) */
static ssize_t readpath_show(struct kobject *kobj, struct kobj_attribute *attr,
			     char *buf)
{
	return puma_readpath_show(buf);
}

static struct kobj_attribute readpath_attr = __ATTR_RO(readpath);

static struct attribute *puma_attrs[] = {
	&build_release_attr.attr,
	&version_attr.attr,
	&readpath_attr.attr,
	NULL,
};

static const struct attribute_group puma_attr_group = {
	.attrs = puma_attrs,
};

static int __init puma_init(void)
{
	int ret;

	puma_kobj = kobject_create_and_add("puma", kernel_kobj);
	if (!puma_kobj)
		return -ENOMEM;

	ret = sysfs_create_group(puma_kobj, &puma_attr_group);
	if (ret)
		goto out_put_kobj;
	ret = puma_index_init();
	if (ret)
		goto out_remove_group;
	ret = puma_store_init();
	if (ret)
		goto out_index;
	ret = puma_policy_init();
	if (ret)
		goto out_store;
	ret = puma_peer_init();
	if (ret)
		goto out_policy;
	ret = puma_hooks_init();
	if (ret)
		goto out_peer;
	ret = puma_get_init();
	if (ret)
		goto out_hooks;
	ret = puma_control_init();
	if (ret)
		goto out_get;

	pr_info("version %s loaded\n", PUMA_VERSION);
	return 0;

out_get:
	puma_get_exit();
out_hooks:
	puma_hooks_exit();
out_peer:
	puma_peer_exit();
out_policy:
	puma_policy_exit();
out_store:
	puma_store_exit();
out_index:
	puma_index_exit();
out_remove_group:
	sysfs_remove_group(puma_kobj, &puma_attr_group);
out_put_kobj:
	kobject_put(puma_kobj);
	return ret;
}

static void __exit puma_exit(void)
{
	puma_control_exit();
	puma_get_exit();
	puma_hooks_exit();
	puma_peer_exit();
	puma_seal_exit();
	puma_policy_exit();
	puma_store_exit();
	puma_index_exit();
	sysfs_remove_group(puma_kobj, &puma_attr_group);
	kobject_put(puma_kobj);
	pr_info("unloaded\n");
}

module_init(puma_init);
module_exit(puma_exit);

MODULE_DESCRIPTION("Puma: remote page cache lent by idle guests");
MODULE_LICENSE("GPL");
MODULE_VERSION(PUMA_VERSION);
