// SPDX-License-Identifier: Apache-2.0
/*
 * fstorture - filesystem integrity torture: no read may ever return a stale,
 * misplaced or corrupt block.
 *
 * Puma serves page-cache misses from a remote copy.  A remote copy that
 * outlives a change of the file (overwrite, truncate, hole punch, O_DIRECT
 * write, unlink) would hand an application old data without any error.
 * This tool makes such a block visible.
 *
 * Every 4 KiB block written is self-describing: a header holds a magic, the
 * file id, the file's incarnation (bumped when the file is unlinked and
 * created again), the block index and the block's generation, followed by
 * pseudo-random words derived from those four and a checksum of the whole
 * block.  A block that was never written or was punched out must read as
 * zeros.  For each file the tool keeps the expected generation of every
 * block (0 = zeros) and the expected size.
 *
 * Writer threads change the files: buffered overwrite, append, truncate
 * down and up (the new tail is a hole), fallocate(PUNCH_HOLE), O_DIRECT
 * overwrite, unlink + create, and atomic replace (write a new incarnation
 * under a temporary name and rename it over the old one); now and then
 * fsync.  Reader threads verify: random block ranges with pread(), whole
 * files sequentially, and single blocks through mmap().  Optional threads
 * drop the page cache (echo 3 > /proc/sys/vm/drop_caches) and run an
 * external command (-x, e.g. restart the lender or cut its link) at fixed
 * intervals.  When the time or operation budget is used up, the workers
 * stop, the page cache is dropped once more if -D was given, and a final
 * pass verifies every block of every file.
 *
 * Rule: each file has a rwlock.  A writer holds it for writing from the
 * first system call of an operation until the expected state is updated,
 * a reader holds it for reading from open() to the last comparison.  A
 * reader therefore never races a writer of the same file: whatever differs
 * from the expected state is a real error, never an in-flight write.
 * Readers of different files, and writers of different files, run
 * concurrently.
 *
 * What a mismatch says:
 *   stale       a valid block of this file and index, older generation or
 *               older incarnation: data that was current once;
 *   misplaced   a valid block of another file or another index;
 *   nonzero     data where a hole (truncated or punched range) must be;
 *   zeros       a hole where data must be;
 *   corrupt     anything else (bad magic or checksum);
 *   size        the file is shorter or longer than expected.
 *
 * --inject-stale is a self-test: once, a third into the run, the tool
 * rewrites one block of file 0 with its previous generation (or data into
 * a hole) without updating the expected state, and stops writing to that
 * file, so the readers and the final pass must report it.  A run whose
 * writers never came to file 0 after that point injects it before the
 * final pass.
 *
 * Exit status: 0 all verified, 2 mismatches found, 1 usage, set-up or I/O
 * errors (including a failed -x command).  The last line of output is
 * "fstorture: OK ..." or "fstorture: FAILED ...".
 *
 * All files live in a fresh directory DIR/fstorture.PID, removed at the end
 * of a passing run (kept when it failed or with -k); nothing else in DIR
 * is touched.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BLK 4096
#define WORDS (BLK / sizeof(uint64_t))
#define MAGIC 0x50554d4146535431ULL	/* "PUMAFST1" */
#define MAX_RUN 16			/* blocks per random read or write */
#define MAX_REPORTS 20			/* mismatches printed in full */

/* Block header; the rest of the block is filled by fill_block(). */
struct blk_hdr {
	uint64_t magic;
	uint32_t file;
	uint32_t incarnation;
	uint64_t index;
	uint64_t gen;
	uint64_t sum;		/* checksum of the block with sum = 0 */
};

/*
 * One file under test.  @lock protects everything below it; @gen has
 * @max_blocks entries, the first @nblocks of which are meaningful.
 */
struct tfile {
	pthread_rwlock_t lock;
	unsigned int id;
	char path[64];
	uint32_t incarnation;
	uint64_t nblocks;
	uint64_t next_gen;	/* generations only grow within an incarnation */
	uint32_t *gen;
	int frozen;		/* --inject-stale: writers leave it alone */
};

enum op {
	OP_OVERWRITE, OP_APPEND, OP_TRUNC_DOWN, OP_TRUNC_UP, OP_PUNCH,
	OP_DIRECT, OP_RECREATE, OP_REPLACE, OP_FSYNC, NR_OPS
};

static const char *const op_names[NR_OPS] = {
	"overwrite", "append", "truncate_down", "truncate_up", "punch",
	"direct", "recreate", "replace", "fsync",
};

/* Relative weights of the writer operations. */
static const unsigned int op_weight[NR_OPS] = {
	30, 12, 6, 4, 10, 12, 3, 3, 4,
};

static struct {
	const char *dir;
	char work[4096];
	unsigned int nfiles, max_blocks, readers, writers;
	double seconds, drop_every, hook_every;
	uint64_t max_ops;
	const char *hook;
	uint64_t seed;
	int inject, keep, use_direct, use_punch, verbose;
} cfg = {
	.dir = ".", .nfiles = 8, .max_blocks = 256, .readers = 2,
	.writers = 2, .seconds = 10, .use_direct = 1, .use_punch = 1,
};

static struct tfile *files;
static int stopping;	/* read and set with __atomic builtins */
static double t_start;

/* Counters, updated with __atomic builtins; n_started drives the budget. */
static uint64_t n_started, n_ops, n_op[NR_OPS], n_reads, n_blocks_read, n_drops,
	n_hooks, n_errors, n_mismatches, n_injected;

static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;

static void count(uint64_t *c, uint64_t n)
{
	__atomic_add_fetch(c, n, __ATOMIC_RELAXED);
}

static uint64_t get(uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

static int stopped(void)
{
	return __atomic_load_n(&stopping, __ATOMIC_RELAXED);
}

static void stop(void)
{
	__atomic_store_n(&stopping, 1, __ATOMIC_RELAXED);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void say(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&report_lock);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
	pthread_mutex_unlock(&report_lock);
}

/* An unexpected system call failure: counted, reported, the run goes on. */
static void io_error(const char *what, const struct tfile *f)
{
	int e = errno;

	count(&n_errors, 1);
	say("fstorture: ERROR %s %s: %s\n", what, f ? f->path : "", strerror(e));
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	return x ^ (x >> 33);
}

/* Per-thread xorshift generator. */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static uint64_t rnd_below(uint64_t *s, uint64_t n)
{
	return n ? rnd(s) % n : 0;
}

static uint64_t block_sum(const uint64_t *w)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t i;

	for (i = 0; i < WORDS; i++)
		h = mix(h ^ w[i]);
	return h;
}

static void fill_block(void *buf, unsigned int file, uint32_t inc,
		       uint64_t index, uint64_t gen)
{
	struct blk_hdr *h = buf;
	uint64_t *w = buf, s;
	size_t i;

	h->magic = MAGIC;
	h->file = file;
	h->incarnation = inc;
	h->index = index;
	h->gen = gen;
	h->sum = 0;
	s = mix(((uint64_t)file << 32 | inc) ^ mix(index) ^ mix(gen + 1));
	for (i = sizeof(*h) / sizeof(uint64_t); i < WORDS; i++) {
		s = mix(s + i);
		w[i] = s;
	}
	h->sum = block_sum(w);
}

static int all_zero(const uint64_t *w)
{
	size_t i;

	for (i = 0; i < WORDS; i++)
		if (w[i])
			return 0;
	return 1;
}

/*
 * Whether a mismatch is to be printed: the first time a given wrong
 * version of a block (or size, INDEX = -1) is seen, up to MAX_REPORTS of
 * them; a stale block is usually read many times before the run ends.
 */
static int first_report(const struct tfile *f, uint64_t index, uint64_t gen,
			uint32_t inc)
{
	static struct {
		const struct tfile *f;
		uint64_t index, gen;
		uint32_t inc;
	} seen[MAX_REPORTS];
	static unsigned int nseen;
	unsigned int i;
	int ret = 0;

	pthread_mutex_lock(&report_lock);
	for (i = 0; i < nseen; i++)
		if (seen[i].f == f && seen[i].index == index &&
		    seen[i].gen == gen && seen[i].inc == inc)
			break;
	if (i == nseen && nseen < MAX_REPORTS) {
		seen[nseen].f = f;
		seen[nseen].index = index;
		seen[nseen].gen = gen;
		seen[nseen].inc = inc;
		nseen++;
		ret = 1;
	}
	pthread_mutex_unlock(&report_lock);
	return ret;
}

/*
 * Compare one block read at INDEX of F with its expected state.
 * Caller holds f->lock (read or write).  Returns 0 if it matches.
 */
static int check_block(const struct tfile *f, uint64_t index, void *buf,
		       const char *how)
{
	const struct blk_hdr *h = buf;
	uint32_t want = f->gen[index];
	uint64_t *w = buf, sum;
	char found[160];
	const char *kind;

	if (want == 0) {
		if (all_zero(w))
			return 0;
		kind = "nonzero";
	} else if (all_zero(w)) {
		kind = "zeros";
	} else {
		sum = h->sum;
		((struct blk_hdr *)buf)->sum = 0;
		if (h->magic != MAGIC || block_sum(w) != sum)
			kind = "corrupt";
		else if (h->file != f->id || h->index != index)
			kind = "misplaced";
		else if (h->incarnation == f->incarnation && h->gen == want)
			kind = NULL;
		else if (h->incarnation < f->incarnation ||
			 (h->incarnation == f->incarnation && h->gen < want))
			kind = "stale";
		else
			kind = "corrupt";	/* from the future */
		((struct blk_hdr *)buf)->sum = sum;
		if (!kind)
			return 0;
	}
	count(&n_mismatches, 1);
	if (!first_report(f, index, h->gen, h->incarnation))
		return 1;
	if (h->magic == MAGIC)
		snprintf(found, sizeof(found),
			 "file=%u inc=%u block=%" PRIu64 " gen=%" PRIu64,
			 h->file, h->incarnation, h->index, h->gen);
	else
		snprintf(found, sizeof(found), "first words %016" PRIx64
			 " %016" PRIx64, w[0], w[1]);
	say("fstorture: MISMATCH %s %s block=%" PRIu64 " expected inc=%u gen=%u found %s (%s read, t=%.1fs)\n",
	    kind, f->path, index, f->incarnation, want, found, how,
	    now() - t_start);
	return 1;
}

static void size_mismatch(const struct tfile *f, off_t got, const char *how)
{
	count(&n_mismatches, 1);
	if (!first_report(f, UINT64_MAX, got, 0))
		return;
	say("fstorture: MISMATCH size %s expected %" PRIu64 " bytes found %lld (%s read, t=%.1fs)\n",
	    f->path, f->nblocks * BLK, (long long)got, how, now() - t_start);
}

/* ------------------------------------------------------------------ */
/* Writers.  Every function below is called with f->lock held for writing. */

/* Write blocks [first, first + n) of F with fresh generations through FD. */
static int write_blocks(struct tfile *f, int fd, uint64_t first, uint64_t n,
			void *buf)
{
	uint64_t i, gen;

	for (i = 0; i < n; i++) {
		gen = f->next_gen++;
		fill_block((char *)buf + i * BLK, f->id, f->incarnation,
			   first + i, gen);
	}
	if (pwrite(fd, buf, n * BLK, first * BLK) != (ssize_t)(n * BLK))
		return -1;
	for (i = 0; i < n; i++)
		f->gen[first + i] =
			((struct blk_hdr *)((char *)buf + i * BLK))->gen;
	if (first + n > f->nblocks)
		f->nblocks = first + n;
	return 0;
}

/* A new incarnation of F with NBLOCKS fresh blocks, at PATH. */
static int create_file(struct tfile *f, const char *path, uint64_t nblocks,
		       void *buf)
{
	uint64_t done, n;
	int fd;

	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	f->nblocks = 0;
	memset(f->gen, 0, cfg.max_blocks * sizeof(*f->gen));
	for (done = 0; done < nblocks; done += n) {
		n = nblocks - done < MAX_RUN ? nblocks - done : MAX_RUN;
		if (write_blocks(f, fd, done, n, buf)) {
			close(fd);
			return -1;
		}
	}
	return close(fd);
}

static void do_write_op(struct tfile *f, enum op op, uint64_t *rs, void *buf)
{
	uint64_t first, n, i, size;
	char tmp[sizeof(f->path) + 8];
	int fd = -1, flags;

	if (op == OP_RECREATE || op == OP_REPLACE) {
		if (op == OP_RECREATE && unlink(f->path)) {
			io_error("unlink", f);
			return;
		}
		f->incarnation++;
		f->next_gen = 1;
		size = 1 + rnd_below(rs, cfg.max_blocks / 2);
		snprintf(tmp, sizeof(tmp), "%s.new", f->path);
		if (create_file(f, op == OP_REPLACE ? tmp : f->path, size, buf))
			io_error("create", f);
		else if (op == OP_REPLACE && rename(tmp, f->path))
			io_error("rename", f);
		return;
	}
	flags = O_RDWR;
	if (op == OP_DIRECT)
		flags |= O_DIRECT;
	fd = open(f->path, flags);
	if (fd < 0) {
		io_error("open", f);
		return;
	}
	n = 1 + rnd_below(rs, MAX_RUN);
	switch (op) {
	case OP_OVERWRITE:
	case OP_DIRECT:
		if (!f->nblocks)
			break;
		first = rnd_below(rs, f->nblocks);
		if (first + n > f->nblocks)
			n = f->nblocks - first;
		if (write_blocks(f, fd, first, n, buf))
			io_error(op_names[op], f);
		break;
	case OP_APPEND:
		if (f->nblocks + n > cfg.max_blocks)
			n = cfg.max_blocks - f->nblocks;
		if (n && write_blocks(f, fd, f->nblocks, n, buf))
			io_error("append", f);
		break;
	case OP_TRUNC_DOWN:
		size = rnd_below(rs, f->nblocks + 1);
		if (ftruncate(fd, size * BLK)) {
			io_error("truncate", f);
			break;
		}
		for (i = size; i < f->nblocks; i++)
			f->gen[i] = 0;
		f->nblocks = size;
		break;
	case OP_TRUNC_UP:
		size = f->nblocks + n;
		if (size > cfg.max_blocks)
			break;
		if (ftruncate(fd, size * BLK)) {
			io_error("truncate", f);
			break;
		}
		f->nblocks = size;	/* the new blocks stay 0: a hole */
		break;
	case OP_PUNCH:
		if (!f->nblocks)
			break;
		first = rnd_below(rs, f->nblocks);
		if (first + n > f->nblocks)
			n = f->nblocks - first;
		if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			      first * BLK, n * BLK)) {
			io_error("punch", f);
			break;
		}
		for (i = first; i < first + n; i++)
			f->gen[i] = 0;
		break;
	case OP_FSYNC:
		if (fsync(fd))
			io_error("fsync", f);
		break;
	default:
		break;
	}
	close(fd);
}

static enum op pick_op(uint64_t *rs)
{
	unsigned int total = 0, r, i;

	for (i = 0; i < NR_OPS; i++)
		total += op_weight[i];
	for (;;) {
		r = rnd_below(rs, total);
		for (i = 0; r >= op_weight[i]; i++)
			r -= op_weight[i];
		if (i == OP_DIRECT && !cfg.use_direct)
			continue;
		if (i == OP_PUNCH && !cfg.use_punch)
			continue;
		return i;
	}
}

/* True once the run is over; also charges one operation. */
static int budget_spent(void)
{
	uint64_t ops = __atomic_add_fetch(&n_started, 1, __ATOMIC_RELAXED);

	if (stopped())
		return 1;
	if ((cfg.max_ops && ops > cfg.max_ops) ||
	    (cfg.seconds > 0 && now() - t_start >= cfg.seconds))
		stop();
	return stopped();
}

/*
 * The --inject-stale fault: overwrite one block of F, then put its previous
 * content back behind the expected state's back, as a cache that kept the
 * old page would.  Caller holds f->lock for writing.
 */
static void inject_stale(struct tfile *f, void *buf)
{
	uint64_t i, old_gen;
	uint32_t old_inc = f->incarnation;
	int fd;

	for (i = 0; i < f->nblocks && !f->gen[i]; i++)
		;
	if (i == f->nblocks)
		i = 0;
	fd = open(f->path, O_RDWR);
	if (fd < 0) {
		io_error("inject", f);
		return;
	}
	/* A hole or an empty file: give the block a first generation. */
	if ((i >= f->nblocks || !f->gen[i]) && write_blocks(f, fd, i, 1, buf))
		io_error("inject", f);
	old_gen = f->gen[i];
	if (write_blocks(f, fd, i, 1, buf))
		io_error("inject", f);
	fill_block(buf, f->id, old_inc, i, old_gen);
	if (pwrite(fd, buf, BLK, i * BLK) != BLK)
		io_error("inject", f);
	close(fd);
	f->frozen = 1;
	count(&n_injected, 1);
	say("fstorture: injected stale block %s block=%" PRIu64 " gen=%" PRIu64 " (expected gen=%u)\n",
	    f->path, i, old_gen, f->gen[i]);
}

static void *writer(void *arg)
{
	uint64_t rs = cfg.seed ^ mix((uintptr_t)arg + 1000);
	struct tfile *f;
	enum op op;
	void *buf;

	if (posix_memalign(&buf, BLK, MAX_RUN * BLK))
		return NULL;
	while (!budget_spent()) {
		f = &files[rnd_below(&rs, cfg.nfiles)];
		op = pick_op(&rs);
		pthread_rwlock_wrlock(&f->lock);
		if (cfg.inject && !get(&n_injected) && f->id == 0 &&
		    now() - t_start >= cfg.seconds / 3)
			inject_stale(f, buf);
		if (!f->frozen) {
			do_write_op(f, op, &rs, buf);
			count(&n_op[op], 1);
			count(&n_ops, 1);
		}
		pthread_rwlock_unlock(&f->lock);
	}
	free(buf);
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Readers.  Every function below is called with f->lock held. */

/* Check the size of the open file FD against F's expected size. */
static int check_size(const struct tfile *f, int fd, const char *how)
{
	struct stat st;

	if (fstat(fd, &st)) {
		io_error("fstat", f);
		return -1;
	}
	if ((uint64_t)st.st_size != f->nblocks * BLK) {
		size_mismatch(f, st.st_size, how);
		return -1;
	}
	return 0;
}

/* Read and check blocks [first, first + n) of F through FD. */
static void read_range(const struct tfile *f, int fd, uint64_t first,
		       uint64_t n, void *buf, const char *how)
{
	ssize_t got;
	uint64_t i;

	got = pread(fd, buf, n * BLK, first * BLK);
	if (got < 0) {
		io_error("read", f);
		return;
	}
	if (got != (ssize_t)(n * BLK)) {
		size_mismatch(f, first * BLK + got, how);
		n = got / BLK;
	}
	for (i = 0; i < n; i++)
		check_block(f, first + i, (char *)buf + i * BLK, how);
	count(&n_reads, 1);
	count(&n_blocks_read, n);
}

static void read_sequential(const struct tfile *f, int fd, void *buf,
			    const char *how)
{
	uint64_t first, n;

	for (first = 0; first < f->nblocks; first += n) {
		n = f->nblocks - first < MAX_RUN ? f->nblocks - first
						 : MAX_RUN;
		read_range(f, fd, first, n, buf, how);
	}
}

static void read_mmap(const struct tfile *f, int fd, uint64_t *rs, void *buf)
{
	uint64_t i;
	char *map;

	if (!f->nblocks)
		return;
	map = mmap(NULL, f->nblocks * BLK, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		io_error("mmap", f);
		return;
	}
	i = rnd_below(rs, f->nblocks);
	memcpy(buf, map + i * BLK, BLK);
	munmap(map, f->nblocks * BLK);
	check_block(f, i, buf, "mmap");
	count(&n_reads, 1);
	count(&n_blocks_read, 1);
}

static void verify_one(const struct tfile *f, int mode, uint64_t *rs,
		       void *buf)
{
	static const char *const how[] = { "random", "sequential", "mmap" };
	uint64_t first, n;
	int fd;

	fd = open(f->path, O_RDONLY);
	if (fd < 0) {
		io_error("open", f);
		return;
	}
	if (check_size(f, fd, how[mode]) == 0) {
		switch (mode) {
		case 0:
			if (!f->nblocks)
				break;
			first = rnd_below(rs, f->nblocks);
			n = 1 + rnd_below(rs, MAX_RUN);
			if (first + n > f->nblocks)
				n = f->nblocks - first;
			read_range(f, fd, first, n, buf, how[mode]);
			break;
		case 1:
			read_sequential(f, fd, buf, how[mode]);
			break;
		default:
			read_mmap(f, fd, rs, buf);
			break;
		}
	}
	close(fd);
}

static void *reader(void *arg)
{
	uint64_t rs = cfg.seed ^ mix((uintptr_t)arg + 2000);
	struct tfile *f;
	unsigned int r;
	void *buf;

	buf = malloc(cfg.max_blocks > MAX_RUN ? MAX_RUN * BLK
					      : cfg.max_blocks * BLK);
	if (!buf)
		return NULL;
	while (!budget_spent()) {
		f = &files[rnd_below(&rs, cfg.nfiles)];
		r = rnd_below(&rs, 10);	/* 7 random, 2 mmap, 1 sequential */
		pthread_rwlock_rdlock(&f->lock);
		verify_one(f, r < 7 ? 0 : r < 9 ? 2 : 1, &rs, buf);
		pthread_rwlock_unlock(&f->lock);
		count(&n_ops, 1);
	}
	free(buf);
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Page cache drops and the external hook. */

static int drop_caches(void)
{
	int fd, ok;

	sync();
	fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	if (fd < 0)
		return -1;
	ok = write(fd, "3\n", 2) == 2;
	close(fd);
	return ok ? 0 : -1;
}

/* Sleep up to SECS, in short steps so that the end of the run is seen. */
static void nap(double secs)
{
	double until = now() + secs;

	while (!stopped() && now() < until)
		usleep(50000);
}

static void *dropper(void *arg)
{
	(void)arg;
	for (;;) {
		nap(cfg.drop_every);
		if (stopped())
			break;
		if (drop_caches())
			io_error("drop_caches", NULL);
		else
			count(&n_drops, 1);
	}
	return NULL;
}

static void *hooker(void *arg)
{
	int st;

	(void)arg;
	for (;;) {
		nap(cfg.hook_every);
		if (stopped())
			break;
		st = system(cfg.hook);
		count(&n_hooks, 1);
		if (st != 0) {
			count(&n_errors, 1);
			say("fstorture: ERROR hook '%s' %s %d\n", cfg.hook,
			    WIFEXITED(st) ? "exited" : "status",
			    WIFEXITED(st) ? WEXITSTATUS(st) : st);
		} else if (cfg.verbose) {
			say("fstorture: hook '%s' ran (t=%.1fs)\n", cfg.hook,
			    now() - t_start);
		}
	}
	return NULL;
}

/* ------------------------------------------------------------------ */

static void usage(FILE *out)
{
	fprintf(out,
"usage: fstorture [options]\n"
"  -d DIR         where to create the work directory (default .)\n"
"  -f N           files (default 8)\n"
"  -b N           maximum blocks of 4 KiB per file (default 256)\n"
"  -r N           reader threads (default 2)\n"
"  -w N           writer threads (default 2)\n"
"  -t SECONDS     run time (default 10; 0 = until -n)\n"
"  -n OPS         stop after OPS operations (default: no limit)\n"
"  -D SECONDS     drop the page cache every SECONDS (needs root)\n"
"  -x CMD         run CMD with /bin/sh every -X seconds\n"
"  -X SECONDS     interval of -x (default 5)\n"
"  -s SEED        random seed (default: time)\n"
"  -k             keep the work directory\n"
"  -v             say when the hook runs\n"
"  --no-direct    no O_DIRECT writes (filesystems without O_DIRECT)\n"
"  --no-punch     no hole punching\n"
"  --inject-stale self-test: corrupt one block behind the tool's back\n");
}

/* Numeric options: letter, smallest and largest value accepted. */
static const struct numopt {
	int c;
	double min, max;
} numopts[] = {
	{ 'f', 1, 100000 }, { 'b', 1, 1 << 24 }, { 'r', 0, 1024 },
	{ 'w', 0, 1024 }, { 'n', 0, 1e18 }, { 's', 0, 1e18 },
	{ 't', 0, 1e9 }, { 'D', 0.01, 1e9 }, { 'X', 0.01, 1e9 },
};

/* Parse OPTARG for numeric option C into VAL[C]; -1 if C is not one. */
static int parse_num(int c, const char *s, double *val)
{
	const struct numopt *o;
	char *end;
	double v;

	for (o = numopts; o < numopts + sizeof(numopts) / sizeof(*o); o++) {
		if (o->c != c)
			continue;
		errno = 0;
		v = strtod(s, &end);
		if (errno || end == s || *end || v < o->min || v > o->max) {
			fprintf(stderr, "fstorture: -%c: bad value '%s' (a number from %g to %g)\n",
				c, s, o->min, o->max);
			return -2;
		}
		val[c] = v;
		return 0;
	}
	return -1;
}

static int parse_args(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "no-direct", no_argument, NULL, 'O' },
		{ "no-punch", no_argument, NULL, 'P' },
		{ "inject-stale", no_argument, NULL, 'I' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	double val[128];
	int c, ret;

	val['f'] = cfg.nfiles;
	val['b'] = cfg.max_blocks;
	val['r'] = cfg.readers;
	val['w'] = cfg.writers;
	val['n'] = 0;
	val['s'] = (double)(time(NULL) ^ getpid());
	val['t'] = cfg.seconds;
	val['D'] = 0;
	val['X'] = 5;
	while ((c = getopt_long(argc, argv, "d:f:b:r:w:t:n:D:x:X:s:kvh",
				longopts, NULL)) != -1) {
		if (c == 'd') {
			cfg.dir = optarg;
		} else if (c == 'x') {
			cfg.hook = optarg;
		} else if (c == 'k') {
			cfg.keep = 1;
		} else if (c == 'v') {
			cfg.verbose = 1;
		} else if (c == 'O') {
			cfg.use_direct = 0;
		} else if (c == 'P') {
			cfg.use_punch = 0;
		} else if (c == 'I') {
			cfg.inject = 1;
		} else if (c == 'h') {
			usage(stdout);
			exit(0);
		} else {
			ret = parse_num(c, optarg, val);
			if (ret == -1)
				usage(stderr);
			if (ret)
				return -1;
		}
	}
	cfg.nfiles = val['f'];
	cfg.max_blocks = val['b'];
	cfg.readers = val['r'];
	cfg.writers = val['w'];
	cfg.max_ops = val['n'];
	cfg.seed = val['s'];
	cfg.seconds = val['t'];
	cfg.drop_every = val['D'];
	cfg.hook_every = val['X'];
	if (optind < argc) {
		fprintf(stderr, "fstorture: unexpected argument '%s'\n",
			argv[optind]);
		return -1;
	}
	if (!cfg.seconds && !cfg.max_ops) {
		fprintf(stderr, "fstorture: -t 0 needs -n OPS\n");
		return -1;
	}
	if (!cfg.seed)
		cfg.seed = 1;	/* xorshift must not start at 0 */
	return 0;
}

/* The directory, and whether O_DIRECT and hole punching work in it. */
static int setup(void)
{
	struct stat st;
	void *buf;
	int fd;

	if (stat(cfg.dir, &st) || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "fstorture: %s is not a directory\n", cfg.dir);
		return -1;
	}
	snprintf(cfg.work, sizeof(cfg.work), "%s/fstorture.%d", cfg.dir,
		 (int)getpid());
	if (mkdir(cfg.work, 0755) || chdir(cfg.work)) {
		fprintf(stderr, "fstorture: cannot make %s: %s\n", cfg.work,
			strerror(errno));
		return -1;
	}
	if (cfg.drop_every > 0 && drop_caches()) {
		fprintf(stderr, "fstorture: -D: cannot drop caches: %s\n",
			strerror(errno));
		return -1;
	}
	if (posix_memalign(&buf, BLK, BLK))
		return -1;
	memset(buf, 0, BLK);
	fd = open("probe", O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || pwrite(fd, buf, BLK, 0) != BLK) {
		fprintf(stderr, "fstorture: cannot write in %s: %s\n",
			cfg.work, strerror(errno));
		free(buf);
		return -1;
	}
	if (cfg.use_punch &&
	    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, BLK)) {
		printf("fstorture: no hole punching here (%s)\n",
		       strerror(errno));
		cfg.use_punch = 0;
	}
	close(fd);
	fd = open("probe", O_RDWR | O_DIRECT);
	if (cfg.use_direct && (fd < 0 || pwrite(fd, buf, BLK, 0) != BLK)) {
		printf("fstorture: no O_DIRECT here (%s)\n", strerror(errno));
		cfg.use_direct = 0;
	}
	if (fd >= 0)
		close(fd);
	unlink("probe");
	free(buf);
	return 0;
}

static int create_files(void)
{
	uint64_t rs = cfg.seed;
	unsigned int i;
	void *buf;
	int ret = 0;

	files = calloc(cfg.nfiles, sizeof(*files));
	if (!files || posix_memalign(&buf, BLK, MAX_RUN * BLK))
		return -1;
	for (i = 0; i < cfg.nfiles && !ret; i++) {
		struct tfile *f = &files[i];

		pthread_rwlock_init(&f->lock, NULL);
		f->id = i;
		f->next_gen = 1;
		snprintf(f->path, sizeof(f->path), "f%05u", i);
		f->gen = calloc(cfg.max_blocks, sizeof(*f->gen));
		if (!f->gen)
			ret = -1;
		else if (create_file(f, f->path,
				     1 + rnd_below(&rs, cfg.max_blocks), buf))
			ret = -1;
	}
	if (ret)
		fprintf(stderr, "fstorture: cannot create the files: %s\n",
			strerror(errno));
	free(buf);
	return ret;
}

static void remove_work(void)
{
	unsigned int i;

	for (i = 0; i < cfg.nfiles; i++)
		unlink(files[i].path);
	if (chdir("..") == 0)
		rmdir(cfg.work);
}

static void report(const char *verdict)
{
	unsigned int i;

	printf("fstorture: %s ops=%" PRIu64 " reads=%" PRIu64 " blocks_read=%" PRIu64,
	       verdict, get(&n_ops), get(&n_reads),
	       get(&n_blocks_read));
	for (i = 0; i < NR_OPS; i++)
		printf(" %s=%" PRIu64, op_names[i], get(&n_op[i]));
	printf(" drops=%" PRIu64 " hooks=%" PRIu64 " errors=%" PRIu64
	       " mismatches=%" PRIu64 " seconds=%.1f\n",
	       get(&n_drops), get(&n_hooks), get(&n_errors),
	       get(&n_mismatches), now() - t_start);
}

int main(int argc, char **argv)
{
	pthread_t *tids, drop_tid, hook_tid;
	unsigned int i, n;
	void *buf;

	if (parse_args(argc, argv))
		return 1;
	if (setup() || create_files())
		return 1;
	printf("fstorture: %u files of up to %u blocks in %s, %u readers, %u writers, seed %" PRIu64 "%s%s\n",
	       cfg.nfiles, cfg.max_blocks, cfg.work, cfg.readers, cfg.writers,
	       cfg.seed, cfg.use_direct ? ", O_DIRECT" : "",
	       cfg.use_punch ? ", punch" : "");
	fflush(stdout);
	signal(SIGPIPE, SIG_IGN);
	t_start = now();
	n = cfg.readers + cfg.writers;
	tids = calloc(n, sizeof(*tids));
	if (!tids)
		return 1;
	for (i = 0; i < n; i++)
		if (pthread_create(&tids[i], NULL,
				   i < cfg.writers ? writer : reader,
				   (void *)(uintptr_t)i)) {
			fprintf(stderr, "fstorture: cannot start threads\n");
			return 1;
		}
	if (cfg.drop_every > 0)
		pthread_create(&drop_tid, NULL, dropper, NULL);
	if (cfg.hook)
		pthread_create(&hook_tid, NULL, hooker, NULL);
	for (i = 0; i < n; i++)
		pthread_join(tids[i], NULL);
	stop();
	if (cfg.drop_every > 0)
		pthread_join(drop_tid, NULL);
	if (cfg.hook)
		pthread_join(hook_tid, NULL);

	/*
	 * --inject-stale where no writer reached file 0 after a third of the
	 * run (none runs, or a loaded host starved them): inject now, so that
	 * the self-test never passes for want of a fault.
	 */
	if (cfg.inject && !get(&n_injected)) {
		if (posix_memalign(&buf, BLK, MAX_RUN * BLK))
			return 1;
		pthread_rwlock_wrlock(&files[0].lock);
		inject_stale(&files[0], buf);
		pthread_rwlock_unlock(&files[0].lock);
		free(buf);
	}

	/* Final pass: every block of every file, from disk if -D. */
	if (cfg.drop_every > 0) {
		if (drop_caches())
			io_error("drop_caches", NULL);
		else
			count(&n_drops, 1);
	}
	buf = malloc(MAX_RUN * BLK);
	if (!buf)
		return 1;
	for (i = 0; i < cfg.nfiles; i++)
		verify_one(&files[i], 1, NULL, buf);
	free(buf);

	if (get(&n_mismatches)) {
		report("FAILED");
		printf("fstorture: files kept in %s\n", cfg.work);
		return 2;
	}
	if (get(&n_errors)) {
		report("FAILED");
		printf("fstorture: files kept in %s\n", cfg.work);
		return 1;
	}
	if (cfg.keep)
		printf("fstorture: files kept in %s\n", cfg.work);
	else
		remove_work();
	report("OK");
	return 0;
}
