// SPDX-License-Identifier: GPL-2.0
/*
 * Puma guest module: entry point.
 *
 * Puma turns the free memory of idle guests into a remote page cache for
 * active guests (see docs/architecture.md).  This file only holds the module
 * life cycle and the sysfs root, /sys/kernel/puma, under which the
 * mechanism files (hooks, store, transport) register their attributes.
 *
 * Implementation: puma_kobj is created at load and removed at unload; it is
 * the only global state in this file.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <generated/utsrelease.h>
#include <linux/init.h>
#include <linux/kobject.h>
#include <linux/module.h>
#include <linux/sysfs.h>

#define PUMA_VERSION "0.1"

static struct kobject *puma_kobj;

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

static struct attribute *puma_attrs[] = {
	&build_release_attr.attr,
	&version_attr.attr,
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

	pr_info("version %s loaded\n", PUMA_VERSION);
	return 0;

out_put_kobj:
	kobject_put(puma_kobj);
	return ret;
}

static void __exit puma_exit(void)
{
	sysfs_remove_group(puma_kobj, &puma_attr_group);
	kobject_put(puma_kobj);
}

module_init(puma_init);
module_exit(puma_exit);

MODULE_DESCRIPTION("Puma: remote page cache lent by idle guests");
MODULE_LICENSE("GPL");
MODULE_VERSION(PUMA_VERSION);
