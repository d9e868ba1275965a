// SPDX-License-Identifier: Apache-2.0
/*
 * uffdfault - make some of QEMU's userfaultfd placements fail, for tests.
 *
 * LD_PRELOADed into a QEMU, it wraps ioctl(): of the UFFDIO_COPY and
 * UFFDIO_ZEROPAGE calls (a split migration's pager placing pages), every
 * Nth fails with the error that $PUMA_UFFD_FAULTS names for N, e.g.
 * "EAGAIN=97,ENOMEM=89,EFAULT=211" (the first rule that matches a call
 * wins), as the kernel fails them when it asks for a retry, when a
 * memory cgroup is at its limit, or when the range is gone.  The next
 * call is the real one again.  Each failure is one line on stderr
 * ("uffdfault: EAGAIN ..."), which is QEMU's log in the lab.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <linux/userfaultfd.h>

#define MAX_RULES 4

static const struct {
	const char *name;
	int err;
} errors[] = {
	{ "EAGAIN", EAGAIN }, { "ENOMEM", ENOMEM }, { "EFAULT", EFAULT },
	{ "ENOENT", ENOENT },
};

static struct {
	unsigned long every;
	int err;
	const char *name;
} rules[MAX_RULES];
static int nrules = -1;
static atomic_ulong calls;
static int (*real_ioctl)(int, unsigned long, ...);

static void parse(void)
{
	const char *spec = getenv("PUMA_UFFD_FAULTS");
	char *copy, *tok, *save = NULL;

	nrules = 0;
	if (!spec)
		return;
	copy = strdup(spec);
	for (tok = strtok_r(copy, ",", &save); tok && nrules < MAX_RULES;
	     tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		size_t i;

		if (!eq)
			continue;
		*eq = '\0';
		for (i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
			if (strcmp(tok, errors[i].name))
				continue;
			rules[nrules].every = strtoul(eq + 1, NULL, 10);
			rules[nrules].err = errors[i].err;
			rules[nrules].name = errors[i].name;
			if (rules[nrules].every)
				nrules++;
		}
	}
	fprintf(stderr, "uffdfault: %d rules from %s\n", nrules, spec);
}

int ioctl(int fd, unsigned long request, ...)
{
	unsigned long n;
	va_list ap;
	void *arg;
	int i;

	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (!real_ioctl)
		real_ioctl = dlsym(RTLD_NEXT, "ioctl");
	if (request != UFFDIO_COPY && request != UFFDIO_ZEROPAGE)
		return real_ioctl(fd, request, arg);
	if (nrules < 0)
		parse();
	n = atomic_fetch_add(&calls, 1) + 1;
	for (i = 0; i < nrules; i++) {
		if (n % rules[i].every)
			continue;
		fprintf(stderr, "uffdfault: %s for placement %lu (%s)\n",
			rules[i].name, n,
			request == UFFDIO_COPY ? "copy" : "zeropage");
		errno = rules[i].err;
		return -1;
	}
	return real_ioctl(fd, request, arg);
}
