// SPDX-License-Identifier: Apache-2.0
/*
 * memverify - keep writing and verifying a checksummed memory region.
 *
 * Runs inside a lab guest while the host migrates it.  Every 4 KiB page of
 * the region holds its index, a generation number and pseudo-random words
 * derived from both; a 64-bit checksum of each page is kept in a separate
 * array.  Each round verifies every page against its checksum and its
 * header, then rewrites it with the next generation.  Any mismatch (lost
 * write, stale page, page from elsewhere) is reported with the page index
 * and the program exits 2.  Progress goes to a file after every round so
 * the host can see that verification went on during and after a migration.
 * SIGTERM (or the end of the -t duration) ends it after one last full
 * verification round; exit 0 means every page checked out every time.
 *
 * -x flips one bit of the region after the first round: a self-test that
 * shows the checker catches a single changed bit.
 *
 * Usage: memverify [-m MiB] [-t seconds] [-r MiB/s] [-p progress-file] [-x]
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096
#define WORDS (PAGE / sizeof(uint64_t))

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	stop = sig;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	return x ^ (x >> 33);
}

static uint64_t page_sum(const uint64_t *w)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t i;

	for (i = 0; i < WORDS; i++)
		h = mix(h ^ w[i]);
	return h;
}

static void fill(uint64_t *w, uint64_t idx, uint64_t gen)
{
	uint64_t s = mix(idx * 0x9e3779b97f4a7c15ULL ^ gen);
	size_t i;

	w[0] = idx;
	w[1] = gen;
	for (i = 2; i < WORDS; i++) {
		s = mix(s + i);
		w[i] = s;
	}
}

static void progress(const char *path, const char *state, unsigned long rounds,
		     size_t pages, double t0)
{
	FILE *f;

	if (!path)
		return;
	f = fopen(path, "w");
	if (!f)
		return;
	fprintf(f, "state=%s rounds=%lu pages=%zu elapsed=%.1f\n", state,
		rounds, pages, now() - t0);
	fclose(f);
}

int main(int argc, char **argv)
{
	size_t mib = 64, pages, p;
	double secs = 30, rate = 0, t0, budget;
	const char *out = NULL;
	unsigned long rounds = 0;
	uint64_t *mem, *sums, *gens;
	int c, inject = 0;

	while ((c = getopt(argc, argv, "m:t:r:p:x")) != -1) {
		switch (c) {
		case 'm': mib = strtoul(optarg, NULL, 0); break;
		case 't': secs = atof(optarg); break;
		case 'r': rate = atof(optarg); break;
		case 'p': out = optarg; break;
		case 'x': inject = 1; break;
		default:
			fprintf(stderr, "usage: %s [-m MiB] [-t s] [-r MiB/s] [-p file] [-x]\n",
				argv[0]);
			return 1;
		}
	}
	if (!mib) {
		fprintf(stderr, "memverify: region size must be > 0\n");
		return 1;
	}
	pages = mib * 1024 * 1024 / PAGE;
	mem = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	sums = calloc(pages, sizeof(*sums));
	gens = calloc(pages, sizeof(*gens));
	if (mem == MAP_FAILED || !sums || !gens) {
		fprintf(stderr, "memverify: cannot allocate %zu MiB: %s\n", mib,
			strerror(errno));
		return 1;
	}
	signal(SIGTERM, on_term);
	t0 = now();
	for (p = 0; p < pages; p++) {
		fill(mem + p * WORDS, p, 0);
		sums[p] = page_sum(mem + p * WORDS);
	}
	progress(out, "running", rounds, pages, t0);

	/* Time one round may take at the requested dirty rate. */
	budget = rate > 0 ? mib / rate : 0;
	for (;;) {
		double rs = now();
		int last = stop || rs - t0 >= secs;

		for (p = 0; p < pages; p++) {
			uint64_t *w = mem + p * WORDS;

			if (page_sum(w) != sums[p] || w[0] != p || w[1] != gens[p]) {
				printf("memverify: CORRUPT page=%zu round=%lu expected_gen=%llu found_idx=%llu found_gen=%llu\n",
				       p, rounds, (unsigned long long)gens[p],
				       (unsigned long long)w[0],
				       (unsigned long long)w[1]);
				progress(out, "corrupt", rounds, pages, t0);
				return 2;
			}
			if (last)
				continue;
			fill(w, p, ++gens[p]);
			sums[p] = page_sum(w);
		}
		rounds++;
		if (inject && rounds == 1)
			mem[(pages / 2) * WORDS + 7] ^= 1ULL << 17;
		if (last)
			break;
		progress(out, "running", rounds, pages, t0);
		if (budget > 0 && now() - rs < budget)
			usleep((budget - (now() - rs)) * 1e6);
	}
	progress(out, "ok", rounds, pages, t0);
	printf("memverify: OK rounds=%lu pages=%zu mib=%zu corrupt=0\n", rounds,
	       pages, mib);
	return 0;
}
