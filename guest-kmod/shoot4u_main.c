// SPDX-License-Identifier: GPL-2.0
/*
 * Shoot4U guest module: remote TLB shootdowns as one hypercall.
 *
 * The problem: to flush other CPUs' TLBs, x86 Linux sends each of them an
 * IPI and busy-waits until all have run the flush.  In a VM, a target vCPU
 * may be preempted on the host; the initiator then spins for a host time
 * slice.  Shoot4U (VEE'16) hands the target set and the range to the
 * hypervisor in one hypercall; the hypervisor flushes the targets without
 * waiting for them to be scheduled (a descheduled vCPU flushes before it
 * next runs guest code), so the guest never waits on a preempted vCPU.
 *
 * Where we hook: every remote flush goes through flush_tlb_multi(), which
 * paravirt patching turned into a direct call to native_flush_tlb_multi()
 * at boot, so changing pv_ops now would have no effect.  An ftrace callback
 * on native_flush_tlb_multi() (IBT-safe: ftrace calls us from its own
 * trampoline, and we call no unexported kernel function through a pointer)
 * issues the hypercall for the remote CPUs of the mask, then replaces the
 * mask argument by one holding only the local CPU (or none), so the native
 * code does the local flush and sends no IPI.
 *
 * The rule: a flush that frees page tables (info->freed_tables) keeps its
 * IPIs.  Debian's kernels free page-table pages right after the flush and
 * GUP-fast walks page tables with interrupts disabled, relying on that IPI
 * not being answered until its walk is over; a hypercall flush does not
 * wait for the walker.  Those flushes are counted as "ipi_freed_tables".
 *
 * A hypercall the hypervisor refuses leaves that flush to the native IPIs,
 * for the whole mask (CPUs a successful hypercall flushed are flushed
 * twice, which is harmless): a refusal never leaves a stale TLB entry.
 *
 * Statistics (/sys/kernel/shoot4u/): hypercalls, targets, ipi_freed_tables,
 * hypercall_errors, ipi_fallbacks.
 *
 * Implementation: s4u_ops (the ftrace hook), per-CPU counters s4u_stats.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpumask.h>
#include <linux/ftrace.h>
#include <linux/kobject.h>
#include <linux/kvm_para.h>
#include <linux/module.h>
#include <linux/percpu.h>
#include <linux/smp.h>
#include <linux/sysfs.h>
#include <asm/processor.h>
#include <asm/smp.h>

#include "shoot4u_compat.h"

/*
 * CPUID 0x40000001 EAX bit and hypercall number, from the KVM series
 * (kvm-patches/); see docs/shoot4u.md.  Neither is in the uapi headers of
 * the kernels this module builds against.
 */
#define KVM_FEATURE_SHOOT4U	18
#define KVM_HC_SHOOT4U		13
/* The hypercall's bitmap covers this many APIC IDs from its base. */
#define S4U_BITMAP_BITS		64

struct s4u_stats {
	u64 hypercalls;		/* hypercalls issued */
	u64 targets;		/* remote CPUs flushed by hypercall */
	u64 ipi_freed_tables;	/* flushes left to IPIs: page tables freed */
	u64 hypercall_errors;	/* hypercalls the hypervisor refused */
	u64 ipi_fallbacks;	/* flushes sent by IPI after such a refusal */
};

static DEFINE_PER_CPU(struct s4u_stats, s4u_stats);

/*
 * Fault injection for the lab's coherence tests: skip the remote flushes
 * (no hypercall, no IPI), which leaves stale TLB entries on other CPUs.
 * Never set it outside a test; it can only be given at load time.
 */
static bool fault_skip_remote;
module_param(fault_skip_remote, bool, 0444);
MODULE_PARM_DESC(fault_skip_remote,
		 "Test only: drop remote TLB flushes to prove the checkers see it (default: off)");

/*
 * Fault injection for the lab's fallback test: every hypercall sets a flag
 * no hypervisor defines, so the hypervisor refuses it (-KVM_EINVAL) and
 * the flush must go out by IPI instead.
 */
static bool fault_hypercall_error;
module_param(fault_hypercall_error, bool, 0444);
MODULE_PARM_DESC(fault_hypercall_error,
		 "Test only: make every hypercall fail to prove the IPI fallback (default: off)");
#define S4U_FLAG_UNDEFINED	BIT(0)

/*
 * a2 holds flags (none defined) and a3 is reserved: both 0.  The
 * hypervisor flushes the whole TLB of each target, so the range of the
 * flush (in the flush_tlb_info) is not passed.
 */
static long s4u_hypercall(unsigned long bitmap, u32 base)
{
	return kvm_hypercall4(KVM_HC_SHOOT4U, bitmap, base,
			      fault_hypercall_error ? S4U_FLAG_UNDEFINED : 0,
			      0);
}

/*
 * Flush the TLBs of the CPUs in @mask except this one, by hypercall.
 * Returns false if the hypervisor refused any of the hypercalls: some
 * remote CPUs may then not be flushed, and the caller must flush them all
 * by IPI.  Caller has preemption disabled (as flush_tlb_multi()'s callers
 * do).
 */
static bool s4u_flush_remote(const struct cpumask *mask, int self)
{
	struct s4u_stats *st = this_cpu_ptr(&s4u_stats);
	unsigned long bitmap = 0;
	u32 base = 0, apic;
	bool ok = true;
	long ret;
	int cpu;

	for_each_cpu(cpu, mask) {
		if (cpu == self)
			continue;
		apic = cpu_physical_id(cpu);
		if (bitmap && (apic < base || apic >= base + S4U_BITMAP_BITS)) {
			ret = s4u_hypercall(bitmap, base);
			st->hypercalls++;
			if (ret) {
				st->hypercall_errors++;
				ok = false;
			}
			bitmap = 0;
		}
		if (!bitmap)
			base = apic;
		__set_bit(apic - base, &bitmap);
		st->targets++;
	}
	if (bitmap) {
		ret = s4u_hypercall(bitmap, base);
		st->hypercalls++;
		if (ret) {
			st->hypercall_errors++;
			ok = false;
		}
	}
	return ok;
}

static void notrace s4u_flush_tlb_multi(unsigned long ip,
					unsigned long parent_ip,
					struct ftrace_ops *op,
					struct ftrace_regs *fregs)
{
	struct pt_regs *regs = s4u_fregs_regs(fregs);
	const struct cpumask *mask = (const struct cpumask *)regs->di;
	const struct s4u_flush_info *info =
		(const struct s4u_flush_info *)regs->si;
	int self = smp_processor_id();

	if (info->freed_tables) {
		this_cpu_inc(s4u_stats.ipi_freed_tables);
		return;
	}
	if (!fault_skip_remote && !s4u_flush_remote(mask, self)) {
		/* Refused: native_flush_tlb_multi() flushes the whole mask. */
		this_cpu_inc(s4u_stats.ipi_fallbacks);
		return;
	}
	/* Leave only the local flush to native_flush_tlb_multi(). */
	regs->di = (unsigned long)(cpumask_test_cpu(self, mask) ?
				   cpumask_of(self) : cpu_none_mask);
}

static struct ftrace_ops s4u_ops = {
	.func = s4u_flush_tlb_multi,
	.flags = FTRACE_OPS_FL_RECURSION,
};

static u64 s4u_sum(size_t offset)
{
	u64 sum = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		sum += *(u64 *)((char *)per_cpu_ptr(&s4u_stats, cpu) + offset);
	return sum;
}

#define S4U_STAT_ATTR(field)						\
static ssize_t field##_show(struct kobject *kobj,			\
			    struct kobj_attribute *attr, char *buf)	\
{									\
	return sysfs_emit(buf, "%llu\n",				\
			  s4u_sum(offsetof(struct s4u_stats, field)));	\
}									\
static struct kobj_attribute field##_attr = __ATTR_RO(field)

S4U_STAT_ATTR(hypercalls);
S4U_STAT_ATTR(targets);
S4U_STAT_ATTR(ipi_freed_tables);
S4U_STAT_ATTR(hypercall_errors);
S4U_STAT_ATTR(ipi_fallbacks);

static struct attribute *s4u_attrs[] = {
	&hypercalls_attr.attr,
	&targets_attr.attr,
	&ipi_freed_tables_attr.attr,
	&hypercall_errors_attr.attr,
	&ipi_fallbacks_attr.attr,
	NULL,
};

static const struct attribute_group s4u_attr_group = {
	.attrs = s4u_attrs,
};

static struct kobject *s4u_kobj;

/* kvm_arch_para_features() is not exported: read the KVM leaves here. */
static bool s4u_offered(void)
{
	u32 base = hypervisor_cpuid_base(KVM_SIGNATURE, 0);

	return base && (cpuid_eax(base | KVM_CPUID_FEATURES) &
			BIT(KVM_FEATURE_SHOOT4U));
}

static int __init s4u_init(void)
{
	int ret;

	if (!s4u_offered()) {
		pr_err("the hypervisor does not offer Shoot4U (KVM CPUID 0x40000001 bit %d); enable it with -cpu ...,kvm-shoot4u=on\n",
		       KVM_FEATURE_SHOOT4U);
		return -ENODEV;
	}

	s4u_kobj = kobject_create_and_add("shoot4u", kernel_kobj);
	if (!s4u_kobj)
		return -ENOMEM;
	ret = sysfs_create_group(s4u_kobj, &s4u_attr_group);
	if (ret)
		goto out_put_kobj;

	ret = ftrace_set_filter(&s4u_ops, "native_flush_tlb_multi",
				strlen("native_flush_tlb_multi"), 0);
	if (ret) {
		pr_err("cannot hook native_flush_tlb_multi: %d\n", ret);
		goto out_remove_group;
	}
	ret = register_ftrace_function(&s4u_ops);
	if (ret) {
		pr_err("cannot register the ftrace hook: %d\n", ret);
		goto out_free_filter;
	}
	if (fault_skip_remote)
		pr_warn("fault injection: remote TLB flushes are DROPPED\n");
	pr_info("remote TLB flushes go through hypercall %d\n",
		KVM_HC_SHOOT4U);
	return 0;

out_free_filter:
	ftrace_free_filter(&s4u_ops);
out_remove_group:
	sysfs_remove_group(s4u_kobj, &s4u_attr_group);
out_put_kobj:
	kobject_put(s4u_kobj);
	return ret;
}

static void __exit s4u_exit(void)
{
	/* Returns once no CPU can be inside s4u_flush_tlb_multi(). */
	unregister_ftrace_function(&s4u_ops);
	ftrace_free_filter(&s4u_ops);
	sysfs_remove_group(s4u_kobj, &s4u_attr_group);
	kobject_put(s4u_kobj);
	pr_info("remote TLB flushes use IPIs again\n");
}

module_init(s4u_init);
module_exit(s4u_exit);

MODULE_DESCRIPTION("Shoot4U: remote TLB shootdowns by hypercall");
MODULE_LICENSE("GPL");
