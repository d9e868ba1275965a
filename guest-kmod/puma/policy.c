// SPDX-License-Identifier: GPL-2.0
/*
 * Policies from the Puma thesis that are not the data path itself.
 *
 * RTT guard (borrower): a remote get only pays off while it is faster than
 * the disk.  Every get's latency feeds an exponentially weighted moving
 * average (weight 1/8); while it exceeds puma_cfg.rtt_guard_us, gets are
 * skipped, except one in PUMA_RTT_PROBE, whose latency lets the average
 * come back down when the network recovers.
 *
 * Lender activity (lender): a lender that needs its memory must get it
 * back at once.  Every PUMA_ACT_PERIOD the detector reads two kernel
 * signals: file refaults that were activated (workingset_activate_file:
 * the lender's own cache is too small for its working set; with MGLRU,
 * the 6.12 default, this counts refaults into recent generations) and
 * direct reclaim scans (pgscan_direct: allocations wait for memory), and
 * the growth of the lender's own memory use (total - free - hosted pages
 * - TCP buffers) by more than RAM >> PUMA_GROW_SHIFT in one period: a
 * workload that is taking memory fast, before reclaim even starts.  TCP
 * buffers do not count: a burst of puts waits in the socket queues before
 * it becomes hosted pages, and must not make the lender stop lending.  A period with more
 * than puma_cfg.act_threshold activations, any direct scan, or that
 * growth makes the lender busy: it sends SUSPEND to its borrowers and frees
 * every hosted page.  It lends again (RESUME) only after puma_cfg.quiet_ms
 * of consecutive quiet periods: that is the hysteresis.
 *
 * Implementation: puma_rtt_ewma (ns) and puma_rtt_skip for the guard;
 * puma_act_work, the last counter values and puma_busy_since/puma_quiet
 * for the detector.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/jiffies.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/vmstat.h>
#include <linux/workqueue.h>
#include <net/tcp.h>

#include "puma.h"

#define PUMA_RTT_PROBE		32
#define PUMA_ACT_PERIOD		(HZ / 2)
/*
 * 1/16 of RAM per period.  Receiving puts moves memory through network
 * buffers that TCP does not account (driver rings, per-CPU page lists):
 * 1/64 was crossed by a 512 MiB lender taking in 56 MiB of puts in 2 s.
 */
#define PUMA_GROW_SHIFT		4

static atomic64_t puma_rtt_ewma = ATOMIC64_INIT(0);
static atomic_t puma_rtt_skip = ATOMIC_INIT(0);

bool puma_rtt_allows_get(void)
{
	unsigned int bound = READ_ONCE(puma_cfg.rtt_guard_us);

	if (!bound || atomic64_read(&puma_rtt_ewma) <= bound * 1000ULL)
		return true;
	if (atomic_inc_return(&puma_rtt_skip) % PUMA_RTT_PROBE == 0)
		return true;
	puma_count(PUMA_STAT_GETS_SKIPPED_RTT);
	return false;
}

void puma_rtt_sample(u64 ns)
{
	s64 old = atomic64_read(&puma_rtt_ewma);

	/* Races only lose a sample. */
	if (!old)
		atomic64_set(&puma_rtt_ewma, ns);
	else
		atomic64_set(&puma_rtt_ewma, old - old / 8 + (s64)ns / 8);
}

u64 puma_rtt_ewma_ns(void)
{
	return atomic64_read(&puma_rtt_ewma);
}

static bool puma_busy;
static unsigned long puma_quiet_since;
static unsigned long puma_last_act, puma_last_scan, puma_last_own;
static unsigned long *puma_events;
static void puma_act_fn(struct work_struct *work);
static DECLARE_DELAYED_WORK(puma_act_work, puma_act_fn);

bool puma_lender_suspended(void)
{
	return READ_ONCE(puma_busy);
}

static void puma_act_read(unsigned long *act, unsigned long *scan,
			  unsigned long *own)
{
	*act = global_node_page_state(WORKINGSET_ACTIVATE_FILE);
	all_vm_events(puma_events);
	*scan = puma_events[PGSCAN_DIRECT];
	/* TCP accounts the memory of its socket buffers in pages. */
	*own = totalram_pages() - global_zone_page_state(NR_FREE_PAGES) -
	       puma_store_hosted() -
	       max(0L, atomic_long_read(tcp_prot.memory_allocated));
}

static void puma_act_fn(struct work_struct *work)
{
	unsigned long act, scan, own, dact, dscan;
	long grow;

	puma_act_read(&act, &scan, &own);
	dact = act - puma_last_act;
	dscan = scan - puma_last_scan;
	grow = (long)(own - puma_last_own);
	puma_last_act = act;
	puma_last_scan = scan;
	puma_last_own = own;

	if (!READ_ONCE(puma_cfg.lender))
		goto out;
	if (dact > READ_ONCE(puma_cfg.act_threshold) || dscan ||
	    grow > (long)(totalram_pages() >> PUMA_GROW_SHIFT)) {
		puma_quiet_since = jiffies;
		if (!puma_busy) {
			WRITE_ONCE(puma_busy, true);
			puma_count(PUMA_STAT_LEND_SUSPENDS);
			pr_info("lender busy (activations %lu, direct scans %lu, growth %ld pages): suspending\n",
				dact, dscan, grow);
			puma_peer_broadcast(PUMA_MSG_SUSPEND);
			puma_store_drop_all();
		}
	} else if (puma_busy &&
		   time_after(jiffies, puma_quiet_since +
			      msecs_to_jiffies(READ_ONCE(puma_cfg.quiet_ms)))) {
		WRITE_ONCE(puma_busy, false);
		pr_info("lender quiet: lending again\n");
		puma_peer_broadcast(PUMA_MSG_RESUME);
	}
out:
	schedule_delayed_work(&puma_act_work, PUMA_ACT_PERIOD);
}

int puma_policy_init(void)
{
	puma_events = kcalloc(NR_VM_EVENT_ITEMS, sizeof(*puma_events),
			      GFP_KERNEL);
	if (!puma_events)
		return -ENOMEM;
	puma_act_read(&puma_last_act, &puma_last_scan, &puma_last_own);
	schedule_delayed_work(&puma_act_work, PUMA_ACT_PERIOD);
	return 0;
}

void puma_policy_exit(void)
{
	cancel_delayed_work_sync(&puma_act_work);
	kfree(puma_events);
}
