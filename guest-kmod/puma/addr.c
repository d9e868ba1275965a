// SPDX-License-Identifier: GPL-2.0
/*
 * Peer addresses: IPv4, or IPv6 with the scope of a link-local address.
 *
 * Lenders and borrowers on the cloud's lending channel reach each other
 * at the IPv6 link-local addresses their interfaces configure by
 * themselves, so such an address must name its link: "fe80::1%eth1"
 * (or a numeric interface index).  Control files take
 *
 *	A.B.C.D[:PORT]  or  ADDR6[%IFACE]  or  [ADDR6[%IFACE]]:PORT
 *
 * and the lender's dual-stack socket sees IPv4 borrowers as v4-mapped
 * addresses, which are compared as the IPv4 addresses they are.
 */

#include <linux/inet.h>
#include <linux/netdevice.h>
#include <linux/string.h>
#include <net/ipv6.h>
#include <net/net_namespace.h>

#include "puma.h"

/* The scope of @a's link-local address from "%IFACE" or "%INDEX". */
static int puma_addr_scope(struct sockaddr_in6 *a, const char *scope)
{
	struct net_device *dev;
	u32 index;

	if (!*scope)
		return -EINVAL;
	if (!kstrtou32(scope, 10, &index)) {
		a->sin6_scope_id = index;
		return index ? 0 : -EINVAL;
	}
	rcu_read_lock();
	dev = dev_get_by_name_rcu(&init_net, scope);
	if (dev)
		a->sin6_scope_id = dev->ifindex;
	rcu_read_unlock();
	return dev ? 0 : -ENODEV;
}

static int puma_addr_parse6(const char *s, size_t len, union puma_addr *a)
{
	const char *end, *pct = strnchr(s, len, '%');
	int ret;

	a->v6.sin6_family = AF_INET6;
	if (!in6_pton(s, pct ? pct - s : len, a->v6.sin6_addr.s6_addr, -1,
		      &end) || end != (pct ? pct : s + len))
		return -EINVAL;
	if (ipv6_addr_any(&a->v6.sin6_addr))
		return -EINVAL;
	if (ipv6_addr_type(&a->v6.sin6_addr) & IPV6_ADDR_LINKLOCAL) {
		char scope[IFNAMSIZ];

		if (!pct || len - (pct + 1 - s) >= sizeof(scope))
			return -EINVAL;
		memcpy(scope, pct + 1, len - (pct + 1 - s));
		scope[len - (pct + 1 - s)] = '\0';
		ret = puma_addr_scope(&a->v6, scope);
		if (ret)
			return ret;
	} else if (pct) {
		return -EINVAL;
	}
	puma_addr_normalize(a);
	return 0;
}

/**
 * puma_addr_parse - read a peer's address from a control file
 * @s: the address, NUL-terminated, without blanks
 * @port: true if a port must follow ("A.B.C.D:PORT", "[ADDR6]:PORT"),
 *	  false if there is none
 * @a: the result
 *
 * Return: 0, -EINVAL for a malformed address, a link-local one without
 * its scope or the unspecified address, -ENODEV for an unknown scope.
 */
int puma_addr_parse(const char *s, bool port, union puma_addr *a)
{
	size_t len = strlen(s);
	const char *colon = NULL;
	u16 p = 0;
	int ret;

	memset(a, 0, sizeof(*a));
	if (port) {
		colon = strrchr(s, ':');
		if (!colon || kstrtou16(colon + 1, 10, &p) || !p)
			return -EINVAL;
		len = colon - s;
	}
	if (len && s[0] == '[') {
		if (!port || len < 3 || s[len - 1] != ']')
			return -EINVAL;
		ret = puma_addr_parse6(s + 1, len - 2, a);
	} else if (!strnchr(s, len, ':')) {
		const char *end;

		a->v4.sin_family = AF_INET;
		ret = in4_pton(s, len, (u8 *)&a->v4.sin_addr.s_addr, -1,
			       &end) && end == s + len &&
		      a->v4.sin_addr.s_addr ? 0 : -EINVAL;
	} else if (!port) {
		ret = puma_addr_parse6(s, len, a);
	} else {
		ret = -EINVAL;	/* an IPv6 address with a port needs [] */
	}
	if (ret)
		return ret;
	if (a->sa.sa_family == AF_INET)
		a->v4.sin_port = htons(p);
	else
		a->v6.sin6_port = htons(p);
	return 0;
}

/**
 * puma_addr_normalize - a v4-mapped IPv6 address as the IPv4 one it is
 * @a: an address, e.g. of a borrower accepted on the dual-stack socket
 */
void puma_addr_normalize(union puma_addr *a)
{
	struct sockaddr_in v4 = { .sin_family = AF_INET };

	if (a->sa.sa_family != AF_INET6 ||
	    !ipv6_addr_v4mapped(&a->v6.sin6_addr))
		return;
	v4.sin_port = a->v6.sin6_port;
	v4.sin_addr.s_addr = a->v6.sin6_addr.s6_addr32[3];
	memset(a, 0, sizeof(*a));
	a->v4 = v4;
}

/**
 * puma_addr_equal - the same peer?
 * @a: an address
 * @b: another
 * @port: compare the ports too
 *
 * Link-local IPv6 addresses are the same only on the same link.
 */
bool puma_addr_equal(const union puma_addr *a, const union puma_addr *b,
		     bool port)
{
	if (a->sa.sa_family != b->sa.sa_family)
		return false;
	if (a->sa.sa_family == AF_INET)
		return a->v4.sin_addr.s_addr == b->v4.sin_addr.s_addr &&
		       (!port || a->v4.sin_port == b->v4.sin_port);
	if (a->sa.sa_family != AF_INET6)
		return false;
	return ipv6_addr_equal(&a->v6.sin6_addr, &b->v6.sin6_addr) &&
	       a->v6.sin6_scope_id == b->v6.sin6_scope_id &&
	       (!port || a->v6.sin6_port == b->v6.sin6_port);
}

/* The length of @a's sockaddr, for connect(). */
int puma_addr_len(const union puma_addr *a)
{
	return a->sa.sa_family == AF_INET6 ? sizeof(a->v6) : sizeof(a->v4);
}

/**
 * puma_addr_print - @a as the control files take it (see the top)
 * @buf: where to print
 * @size: its size
 * @a: the address
 * @port: with its port
 *
 * Return: the number of characters printed, as scnprintf().
 */
int puma_addr_print(char *buf, size_t size, const union puma_addr *a,
		    bool port)
{
	const struct sockaddr_in6 *v6 = &a->v6;
	char scope[12] = "";

	if (a->sa.sa_family == AF_INET)
		return port ? scnprintf(buf, size, "%pI4:%u",
					&a->v4.sin_addr,
					ntohs(a->v4.sin_port)) :
			      scnprintf(buf, size, "%pI4", &a->v4.sin_addr);
	if (a->sa.sa_family != AF_INET6)
		return scnprintf(buf, size, "-");
	if (v6->sin6_scope_id)
		snprintf(scope, sizeof(scope), "%%%u", v6->sin6_scope_id);
	return port ? scnprintf(buf, size, "[%pI6c%s]:%u", &v6->sin6_addr,
				scope, ntohs(v6->sin6_port)) :
		      scnprintf(buf, size, "%pI6c%s", &v6->sin6_addr, scope);
}
