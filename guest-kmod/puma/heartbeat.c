// SPDX-License-Identifier: GPL-2.0
/*
 * Heartbeats: a connection whose peer says nothing for peer_timeout_ms
 * is closed ("peer silent").  A lender then frees what it hosts for a
 * borrower whose VM stopped or whose host went away without closing the
 * connection (nothing else would: a lender only ever answers), and a
 * borrower forgets what it put to a lender that no longer answers,
 * instead of paying a get timeout for each of those pages.
 *
 * A borrower that received nothing for heartbeat_ms sends a PING; the
 * lender's PONG, like any other message, counts as a sign of life, and
 * the PING is the lender's sign of life of an idle borrower.  Both checks
 * run in the connection's receiving thread while it waits for a message
 * (woken every half second by the transport's receive timeout).
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/jiffies.h>

#include "peer.h"
#include "puma.h"

/* A message of the peer came in: it is alive. */
void puma_heartbeat_rx(struct puma_peer *p)
{
	WRITE_ONCE(p->last_rx, jiffies);
}

/* The connection is ready: the peer's silence is counted from now. */
void puma_heartbeat_start(struct puma_peer *p)
{
	p->last_rx = jiffies;
	p->ping_at = p->last_rx;
}

/*
 * The receiving thread of @p waits for a message: close a silent peer,
 * or (borrower) ask a quiet one whether it is there.  Returns a reason to
 * close the connection, or PUMA_OK.
 */
int puma_heartbeat_idle(struct puma_peer *p)
{
	unsigned int timeout = READ_ONCE(puma_cfg.peer_timeout_ms);
	unsigned int every = READ_ONCE(puma_cfg.heartbeat_ms);
	unsigned long last = READ_ONCE(p->last_rx);
	unsigned long now = jiffies;

	if (timeout && time_after(now, last + msecs_to_jiffies(timeout)))
		return PUMA_ERR_SILENT;
	if (p->lender_side || !every ||
	    time_before(now, last + msecs_to_jiffies(every)) ||
	    time_before(now, p->ping_at + msecs_to_jiffies(every)))
		return PUMA_OK;
	p->ping_at = now;
	if (puma_send_small(p, PUMA_MSG_PING, ++p->ping_req, NULL, 0))
		return PUMA_ERR_IO;
	puma_count(PUMA_STAT_PINGS);
	return PUMA_OK;
}
