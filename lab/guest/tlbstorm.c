// SPDX-License-Identifier: Apache-2.0
/*
 * tlbstorm - remote TLB shootdowns on demand, timed and checked.
 *
 * Worker threads, one per other CPU (pinned), keep touching a shared region
 * so that every CPU caches its translations; the main thread, pinned to
 * CPU 0, changes the mapping under them.  Each change is a remote TLB
 * shootdown whose latency the main thread measures, and the workers check
 * that the change is visible everywhere once the system call returned:
 *
 * -m mprotect (default): the region flips read-only / read-write.  A worker
 *   reads the period counter, writes, reads the counter again; a write that
 *   succeeded while both reads saw the same read-only period went through a
 *   stale writable translation.
 * -m remap: a new page holding generation G is moved over the region with
 *   mremap(); then G is published.  A worker that reads G published and
 *   then finds another value in the page used a stale translation (of a
 *   page that was freed and may be reused).
 *
 * Usage: tlbstorm [-m mprotect|remap] [-n ops] [-t threads] [-p pages]
 * Prints: mode=M ops=N threads=T p50_us=.. p90_us=.. p99_us=.. max_us=..
 *         total_s=.. checks=C violations=V      (exit 2 if V > 0)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096

static atomic_int stop;
static atomic_ulong period;	/* odd: region is read-only */
static atomic_ulong generation;	/* remap mode: value the region holds */
static atomic_ulong violations, checks;
static unsigned char *region;
static size_t region_len;
static int remap_mode;
static __thread sigjmp_buf fault_env;
static __thread volatile sig_atomic_t probing;

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static void on_segv(int sig)
{
	if (probing)
		siglongjmp(fault_env, 1);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void check_write(size_t off)
{
	unsigned long p1, p2;

	p1 = atomic_load(&period);
	probing = 1;
	if (sigsetjmp(fault_env, 1)) {
		probing = 0;
		return;		/* refused: fine in any period */
	}
	((volatile unsigned char *)region)[off]++;
	probing = 0;
	atomic_thread_fence(memory_order_seq_cst);
	p2 = atomic_load(&period);
	atomic_fetch_add(&checks, 1);
	if ((p1 & 1) && p1 == p2)
		atomic_fetch_add(&violations, 1);
}

static void check_read(size_t off)
{
	unsigned long g = atomic_load(&generation);
	unsigned long v = *(volatile unsigned long *)(region + off);

	atomic_fetch_add(&checks, 1);
	if (v < g)
		atomic_fetch_add(&violations, 1);
}

static void *worker(void *arg)
{
	size_t off = 0;

	pin((int)(long)arg);
	while (!atomic_load(&stop)) {
		if (remap_mode)
			check_read(off);
		else
			check_write(off + 64 * (long)arg % PAGE);
		off = (off + PAGE) % region_len;
	}
	return NULL;
}

static void flip(void)
{
	mprotect(region, region_len, PROT_READ);
	atomic_fetch_add(&period, 1);	/* odd: read-only from now on */
}

static void unflip(void)
{
	atomic_fetch_add(&period, 1);	/* even before it becomes writable */
	mprotect(region, region_len, PROT_READ | PROT_WRITE);
}

static void remap(unsigned char *staging)
{
	unsigned long g = atomic_load(&generation) + 1;

	for (size_t i = 0; i < region_len; i += PAGE)
		*(unsigned long *)(staging + i) = g;
	mremap(staging, region_len, region_len,
	       MREMAP_MAYMOVE | MREMAP_FIXED, region);
	atomic_store(&generation, g);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int ops = 2000, threads = sysconf(_SC_NPROCESSORS_ONLN) - 1, pages = 16;
	const char *mode = "mprotect";
	unsigned char *staging = NULL;
	pthread_t *tids;
	double *lat, t0;
	int c;

	while ((c = getopt(argc, argv, "m:n:t:p:")) != -1) {
		switch (c) {
		case 'm': mode = optarg; break;
		case 'n': ops = atoi(optarg); break;
		case 't': threads = atoi(optarg); break;
		case 'p': pages = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-m mprotect|remap] [-n ops] [-t threads] [-p pages]\n",
				argv[0]);
			return 1;
		}
	}
	remap_mode = !strcmp(mode, "remap");
	if ((!remap_mode && strcmp(mode, "mprotect")) || ops <= 0 ||
	    threads < 0 || pages <= 0) {
		fprintf(stderr, "tlbstorm: bad mode '%s' or count\n", mode);
		return 1;
	}
	region_len = (size_t)pages * PAGE;
	region = mmap(NULL, region_len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	lat = calloc(ops, sizeof(*lat));
	tids = calloc(threads + 1, sizeof(*tids));
	if (region == MAP_FAILED || !lat || !tids) {
		perror("tlbstorm");
		return 1;
	}
	signal(SIGSEGV, on_segv);
	pin(0);
	for (long i = 0; i < threads; i++)
		pthread_create(&tids[i], NULL, worker, (void *)(i + 1));
	usleep(200000);

	t0 = now_us();
	for (int i = 0; i < ops; i++) {
		double s;

		if (remap_mode) {
			staging = mmap(NULL, region_len, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
				       -1, 0);
			s = now_us();
			remap(staging);
		} else {
			s = now_us();
			flip();
		}
		lat[i] = now_us() - s;
		if (!remap_mode) {
			usleep(100);	/* let the workers try to write */
			unflip();
		}
	}
	t0 = now_us() - t0;
	atomic_store(&stop, 1);
	for (int i = 0; i < threads; i++)
		pthread_join(tids[i], NULL);

	qsort(lat, ops, sizeof(*lat), cmp);
	printf("mode=%s ops=%d threads=%d p50_us=%.1f p90_us=%.1f p99_us=%.1f max_us=%.1f total_s=%.3f checks=%lu violations=%lu\n",
	       mode, ops, threads, lat[ops / 2], lat[(int)(ops * 0.9)],
	       lat[(int)(ops * 0.99)], lat[ops - 1], t0 / 1e6,
	       atomic_load(&checks), atomic_load(&violations));
	return atomic_load(&violations) ? 2 : 0;
}
