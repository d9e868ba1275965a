// SPDX-License-Identifier: Apache-2.0
/*
 * mmiorace - MMIO reads while the memory map changes under them.
 *
 * Finds QEMU's "edu" test device (PCI 1234:11e8), maps its BAR0 and reads
 * the identification register (0x010000ed) in a loop on CPU 1, while a
 * thread on CPU 0 turns the device's memory decoding (PCI_COMMAND bit 1)
 * off and on every INTERVAL microseconds.  Each toggle changes the guest's
 * memory map, so under TCG every vCPU flushes its TLB.  A read may see the
 * identification (decoding on) or unassigned memory (decoding off: all
 * ones or zero), never anything else: any other value is another region's
 * data, served through a TLB entry looked up in the wrong memory map.
 *
 * Usage: mmiorace [-t SECONDS] [-i INTERVAL_US]
 * Prints "reads N ident N unassigned N wrong N toggles N" and up to five
 * wrong values; exits 1 when a read was wrong, 2 on setup errors.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define EDU_IDENT	0x010000edu
#define PCI_COMMAND	4
#define CMD_MEMORY	0x2

static volatile int stop;
static int config_fd;
static unsigned int interval_us = 2000;
static long toggles;

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		perror("sched_setaffinity");
}

static int read_hex(const char *dir, const char *name, unsigned int *val)
{
	char path[600];
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	if (!f)
		return 0;
	ok = fscanf(f, "%x", val) == 1;
	fclose(f);
	return ok;
}

static int find_edu(char *dir, size_t len)
{
	const char *base = "/sys/bus/pci/devices";
	struct dirent *e;
	unsigned int vendor, device;
	DIR *d = opendir(base);

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(dir, len, "%s/%s", base, e->d_name);
		if (read_hex(dir, "vendor", &vendor) && vendor == 0x1234 &&
		    read_hex(dir, "device", &device) && device == 0x11e8) {
			closedir(d);
			return 1;
		}
	}
	closedir(d);
	return 0;
}

static void set_command(uint16_t cmd)
{
	if (pwrite(config_fd, &cmd, sizeof(cmd), PCI_COMMAND) != sizeof(cmd)) {
		perror("write PCI_COMMAND");
		exit(2);
	}
}

static void *toggler(void *arg)
{
	uint16_t cmd = *(uint16_t *)arg;

	pin(0);
	while (!stop) {
		set_command(cmd & ~CMD_MEMORY);
		set_command(cmd | CMD_MEMORY);
		toggles++;
		/* Room for the main loop: each toggle holds the BQL a while. */
		usleep(interval_us);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long reads = 0, ident = 0, unassigned = 0, wrong = 0;
	volatile uint32_t *bar;
	unsigned int secs = 10;
	char dir[300], path[320];
	pthread_t thread;
	uint16_t cmd;
	time_t end;
	int opt, fd;

	while ((opt = getopt(argc, argv, "t:i:")) != -1) {
		if (opt == 't')
			secs = strtoul(optarg, NULL, 0);
		else if (opt == 'i')
			interval_us = strtoul(optarg, NULL, 0);
		else
			return 2;
	}
	if (!find_edu(dir, sizeof(dir))) {
		fprintf(stderr, "no edu device (PCI 1234:11e8)\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/config", dir);
	config_fd = open(path, O_RDWR);
	snprintf(path, sizeof(path), "%s/resource0", dir);
	fd = open(path, O_RDWR | O_SYNC);
	if (config_fd < 0 || fd < 0) {
		perror(path);
		return 2;
	}
	if (pread(config_fd, &cmd, sizeof(cmd), PCI_COMMAND) != sizeof(cmd)) {
		perror("read PCI_COMMAND");
		return 2;
	}
	cmd |= CMD_MEMORY;
	set_command(cmd);
	bar = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (bar == MAP_FAILED) {
		perror("mmap BAR0");
		return 2;
	}
	if (bar[0] != EDU_IDENT) {
		fprintf(stderr, "edu identification reads %#x\n", bar[0]);
		return 2;
	}
	pin(1);
	if (pthread_create(&thread, NULL, toggler, &cmd)) {
		perror("pthread_create");
		return 2;
	}
	end = time(NULL) + secs;
	while (time(NULL) < end) {
		/* Pauses let the main loop take the BQL (the agent answers). */
		usleep(500);
		for (int i = 0; i < 2000; i++) {
			uint32_t v = bar[0];

			reads++;
			if (v == EDU_IDENT) {
				ident++;
			} else if (v == 0xffffffffu || v == 0) {
				unassigned++;
			} else {
				if (wrong < 5)
					printf("wrong %#x\n", v);
				wrong++;
			}
		}
	}
	stop = 1;
	pthread_join(thread, NULL);
	set_command(cmd);
	printf("reads %ld ident %ld unassigned %ld wrong %ld toggles %ld\n",
	       reads, ident, unassigned, wrong, toggles);
	return wrong ? 1 : 0;
}
