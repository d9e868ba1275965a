// SPDX-License-Identifier: GPL-2.0-only
/*
 * ufdwrite - a write(2) that stops inside the kernel until told to go on
 *
 *   ufdwrite FILE TEXT GOFILE
 *
 * Writes TEXT at offset 0 of FILE (no truncation) from a buffer that is
 * not mapped yet: a page registered with userfaultfd.  The kernel's
 * write path takes the file's locks and updates its time stamps, then
 * faults on the buffer while it copies, and waits there.  ufdwrite then
 * prints "blocked" and waits until GOFILE exists; then it fills the page
 * with TEXT (UFFDIO_COPY), the write completes, and it prints
 * "wrote N".  A test can so do something while a write is half done.
 * Exit status: 0 if all of TEXT was written, 1 otherwise (2: usage).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define WAIT_S	300

static int fd;
static char *buf;
static size_t len;
static ssize_t written;

static void *writer(void *arg)
{
	(void)arg;
	written = pwrite(fd, buf, len, 0);
	if (written < 0)
		perror("ufdwrite: pwrite");
	return NULL;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

int main(int argc, char **argv)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg;
	struct uffdio_copy copy;
	struct uffd_msg msg;
	struct pollfd pfd;
	long page = sysconf(_SC_PAGESIZE);
	pthread_t thr;
	char *src;
	int uffd, i;

	if (argc != 4) {
		fprintf(stderr, "usage: ufdwrite FILE TEXT GOFILE\n");
		return 2;
	}
	len = strlen(argv[2]);
	if (!len || len > (size_t)page) {
		fprintf(stderr, "ufdwrite: TEXT must be 1 to %ld bytes\n", page);
		return 2;
	}
	fd = open(argv[1], O_WRONLY);
	if (fd < 0)
		die("ufdwrite: open");
	uffd = syscall(SYS_userfaultfd, O_CLOEXEC);
	if (uffd < 0)
		die("ufdwrite: userfaultfd");
	if (ioctl(uffd, UFFDIO_API, &api))
		die("ufdwrite: UFFDIO_API");
	buf = mmap(NULL, page, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	src = mmap(NULL, page, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED || src == MAP_FAILED)
		die("ufdwrite: mmap");
	memcpy(src, argv[2], len);
	reg.range.start = (uintptr_t)buf;
	reg.range.len = page;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	if (ioctl(uffd, UFFDIO_REGISTER, &reg))
		die("ufdwrite: UFFDIO_REGISTER");
	if (pthread_create(&thr, NULL, writer, NULL))
		die("ufdwrite: pthread_create");

	pfd.fd = uffd;
	pfd.events = POLLIN;
	if (poll(&pfd, 1, WAIT_S * 1000) != 1)
		die("ufdwrite: no fault from the write");
	if (read(uffd, &msg, sizeof(msg)) != sizeof(msg) ||
	    msg.event != UFFD_EVENT_PAGEFAULT)
		die("ufdwrite: read of the fault");
	printf("blocked\n");
	fflush(stdout);

	for (i = 0; i < WAIT_S * 100 && access(argv[3], F_OK); i++)
		usleep(10000);
	if (access(argv[3], F_OK))
		fprintf(stderr, "ufdwrite: %s did not appear\n", argv[3]);

	copy.dst = (uintptr_t)buf;
	copy.src = (uintptr_t)src;
	copy.len = page;
	copy.mode = 0;
	if (ioctl(uffd, UFFDIO_COPY, &copy))
		die("ufdwrite: UFFDIO_COPY");
	pthread_join(thr, NULL);
	printf("wrote %zd\n", written);
	return written == (ssize_t)len ? 0 : 1;
}
