// SPDX-License-Identifier: GPL-2.0
/*
 * Build-time check that struct s4u_flush_info (shoot4u_compat.h) matches
 * the head of the kernel's struct flush_tlb_info.  asm/tlbflush.h only
 * defines that struct outside modules, so this file, which emits no code,
 * reads it as built-in code would.
 */
#undef MODULE
#include <linux/build_bug.h>
#include <linux/stddef.h>
#include <asm/tlbflush.h>

#include "shoot4u_compat.h"

#define S4U_SAME_FIELD(f)						\
	static_assert(offsetof(struct flush_tlb_info, f) ==		\
		      offsetof(struct s4u_flush_info, f) &&		\
		      sizeof_field(struct flush_tlb_info, f) ==		\
		      sizeof_field(struct s4u_flush_info, f))

S4U_SAME_FIELD(mm);
S4U_SAME_FIELD(start);
S4U_SAME_FIELD(end);
S4U_SAME_FIELD(new_tlb_gen);
S4U_SAME_FIELD(initiating_cpu);
S4U_SAME_FIELD(stride_shift);
S4U_SAME_FIELD(freed_tables);
