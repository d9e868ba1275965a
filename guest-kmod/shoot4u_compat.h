/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shoot4U guest module: the differences between Debian's 6.1 and 6.12
 * kernels, as inline helpers, so that shoot4u_main.c has no version checks.
 */
#ifndef SHOOT4U_COMPAT_H
#define SHOOT4U_COMPAT_H

#include <linux/ftrace.h>
#include <linux/version.h>

/* The saved registers of an ftrace callback (struct ftrace_regs). */
static inline struct pt_regs *s4u_fregs_regs(struct ftrace_regs *fregs)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 12, 0)
	return &arch_ftrace_regs(fregs)->regs;
#else
	return &fregs->regs;
#endif
}

/*
 * The head of the kernel's struct flush_tlb_info (asm/tlbflush.h), which
 * hides it from modules.  The same on 6.1 and 6.12; shoot4u_layout.c
 * checks it against the real definition at build time.
 */
struct s4u_flush_info {
	struct mm_struct	*mm;
	unsigned long		start;
	unsigned long		end;
	u64			new_tlb_gen;
	unsigned int		initiating_cpu;
	u8			stride_shift;
	u8			freed_tables;
};

#endif /* SHOOT4U_COMPAT_H */
