// SPDX-License-Identifier: Apache-2.0
/*
 * hcprobe - what a user-space (CPL 3) VMCALL / VMMCALL does in this guest.
 *
 * A KVM hypercall from CPL 3 must fail with -KVM_EPERM (-1 in RAX) where
 * the VMM implements hypercalls, and raise #UD (SIGILL) where it does not.
 * Prints "vmcall=R vmmcall=R" with R one of eperm, sigill or rax=<value>.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>

static sigjmp_buf env;

static void on_sigill(int sig)
{
	(void)sig;
	siglongjmp(env, 1);
}

static void probe(const char *name, int amd)
{
	long rax = 13;	/* KVM_HC_SHOOT4U */

	if (sigsetjmp(env, 1)) {
		printf("%s=sigill", name);
		return;
	}
	if (amd)
		asm volatile(".byte 0x0f, 0x01, 0xd9" : "+a"(rax) : : "memory");
	else
		asm volatile(".byte 0x0f, 0x01, 0xc1" : "+a"(rax) : : "memory");
	if (rax == -1)
		printf("%s=eperm", name);
	else
		printf("%s=rax=%ld", name, rax);
}

int main(void)
{
	signal(SIGILL, on_sigill);
	probe("vmcall", 0);
	printf(" ");
	probe("vmmcall", 1);
	printf("\n");
	return 0;
}
