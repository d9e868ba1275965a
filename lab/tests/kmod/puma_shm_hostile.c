// SPDX-License-Identifier: Apache-2.0
/*
 * A hostile lender on Puma's shared memory transport (guest-kmod/puma/
 * shm.c, docs/puma-protocol.md): run in a guest without puma.ko, it maps
 * the ivshmem device's shared memory (BAR2, the sysfs resource2 file),
 * answers the borrower's epoch as a lender would, so that the borrower's
 * connection comes up, and then breaks the rings one way (CASE):
 *
 *   prod   the lender-to-borrower ring's prod says more bytes than the
 *          ring holds
 *   cons   the borrower-to-lender ring's cons is ahead of what the
 *          borrower produced (set before the connection is up)
 *   frame  a well-placed message header whose length is absurd
 *   live   no setup of its own: beside a real lender's puma.ko, with the
 *          connection up, the lender-to-borrower prod jumps past the
 *          ring (what a compromised lender kernel could write), again
 *          and again until the borrower's epoch changes
 *
 * Usage: puma_shm_hostile RESOURCE2 CASE; prints "ok" once done, or
 * fails.  The borrower must end the connection with a clear reason.
 * Built static on the lab host by test_puma_shm.py.
 */

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAGIC		0x314d4850u
#define DATA		4096u
#define RING_MAX	(16u << 20)
#define PROTO_MAGIC	0x414d5550u

/* Offsets in BAR2 (struct puma_shm_hdr): slots 64 bytes, indices 128. */
#define SLOT(i)		((i) * 64u)
#define S_MAGIC		0
#define S_IVPOS		4
#define S_EPOCH		8
#define S_ACK		12
#define RING_PROD(i)	(128u + (i) * 128u)
#define RING_CONS(i)	(128u + (i) * 128u + 64u)

static volatile uint8_t *mem;

static uint32_t rd(uint32_t off)
{
	return __atomic_load_n((volatile uint32_t *)(mem + off),
			       __ATOMIC_ACQUIRE);
}

static void wr(uint32_t off, uint32_t v)
{
	__atomic_store_n((volatile uint32_t *)(mem + off), v,
			 __ATOMIC_RELEASE);
}

static void die(const char *what)
{
	fprintf(stderr, "puma_shm_hostile: %s\n", what);
	exit(1);
}

int main(int argc, char **argv)
{
	uint32_t ring, be, epoch, half;
	struct stat st;
	const char *c;
	int fd, i;

	if (argc != 3)
		die("usage: puma_shm_hostile RESOURCE2 prod|cons|frame");
	c = argv[2];
	fd = open(argv[1], O_RDWR | O_SYNC);
	if (fd < 0 || fstat(fd, &st))
		die("cannot open the shared memory");
	mem = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		   0);
	if (mem == MAP_FAILED)
		die("cannot map the shared memory");
	half = (st.st_size - DATA) / 2;
	for (ring = 1; ring * 2 <= half; ring *= 2)
		;
	if (ring > RING_MAX)
		ring = RING_MAX;

	if (!strcmp(c, "live")) {
		uint32_t p0 = rd(RING_PROD(1));

		be = rd(SLOT(1) + S_EPOCH);
		if (!be || rd(SLOT(1) + S_ACK) != rd(SLOT(0) + S_EPOCH) ||
		    !rd(SLOT(0) + S_EPOCH))
			die("no connection up");
		/*
		 * The lender's puma.ko rewrites prod whenever it sends: keep
		 * the bad value there (for 10 s at most) until the borrower
		 * ends the connection (its epoch changes).
		 */
		for (i = 0; i < 10000 && rd(SLOT(1) + S_EPOCH) == be; i++) {
			wr(RING_PROD(1), p0 + 2 * ring + 7);
			usleep(1000);
		}
		if (rd(SLOT(1) + S_EPOCH) == be)
			die("the borrower kept the connection");
		printf("ok\n");
		return 0;
	}

	/* The borrower's epoch (slot 1), as a lender waits for it. */
	for (i = 0; i < 600; i++) {
		if (rd(SLOT(1) + S_MAGIC) == MAGIC && rd(SLOT(1) + S_EPOCH))
			break;
		usleep(50000);
	}
	be = rd(SLOT(1) + S_EPOCH);
	if (!be)
		die("no borrower in the shared memory");
	/* A lender's reset: the indices it owns, then its slot. */
	wr(RING_PROD(1), 0);
	wr(RING_CONS(0), strcmp(c, "cons") ? 0 : 0x7fff0000u);
	srand(time(NULL));
	epoch = (uint32_t)rand() | 1;
	wr(SLOT(0) + S_MAGIC, MAGIC);
	wr(SLOT(0) + S_IVPOS, 0xffff);
	wr(SLOT(0) + S_ACK, be);
	wr(SLOT(0) + S_EPOCH, epoch);
	/* The borrower acknowledges: its connection is up. */
	for (i = 0; i < 600; i++) {
		if (rd(SLOT(1) + S_ACK) == epoch)
			break;
		if (rd(SLOT(1) + S_EPOCH) != be) {	/* it started again */
			be = rd(SLOT(1) + S_EPOCH);
			wr(SLOT(0) + S_ACK, be);
		}
		usleep(20000);
	}
	if (rd(SLOT(1) + S_ACK) != epoch)
		die("the borrower never acknowledged");
	if (!strcmp(c, "prod")) {
		wr(RING_PROD(1), 2 * ring + 7);
	} else if (!strcmp(c, "frame")) {
		volatile uint8_t *d = mem + DATA + ring;
		uint32_t hdr[6] = { PROTO_MAGIC, 1 /* HELLO, flags 0 */,
				    0xfffffff0u, 0, 0, 0 };

		for (i = 0; i < 24; i++)
			d[i] = ((uint8_t *)hdr)[i];
		wr(RING_PROD(1), 24);
	} else if (strcmp(c, "cons")) {
		die("unknown case");
	}
	printf("ok\n");
	return 0;
}
