// SPDX-License-Identifier: GPL-2.0
/*
 * The handshake of a peer connection (protocol version 2,
 * docs/puma-protocol.md), run by the connection's thread before any other
 * message: HELLO with a random nonce both ways; the borrower's AUTH (an
 * HMAC-SHA256 of both HELLOs with the pair's key), checked by the lender,
 * and only then the lender's, so that a client without the key never gets
 * anything keyed to test guesses against; then one key per direction,
 * derived from the pair's key and both nonces (HKDF with HMAC-SHA256),
 * with which peer.c tags every later message.
 *
 * The whole exchange must be over in handshake_timeout_ms, whatever the
 * peer sends meanwhile (peer.c's receive path enforces p->hs_deadline),
 * and the big receive and reply buffers only come once the peer proved
 * it has the key.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <crypto/algapi.h>
#include <crypto/hash.h>
#include <crypto/sha2.h>
#include <linux/jiffies.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uio.h>
#include <linux/utsname.h>

#include "peer.h"
#include "puma.h"

static unsigned int handshake_timeout_ms = 5000;
module_param(handshake_timeout_ms, uint, 0644);
MODULE_PARM_DESC(handshake_timeout_ms,
		 "A connection whose handshake is not over after this long is closed (5000)");

/**
 * puma_digest - one digest of a prefix then the pieces of a message
 * @tfm: the hash, keyed already if it is an HMAC
 * @prefix: hashed first, may be NULL
 * @prefix_len: its length
 * @parts: the @n pieces hashed after it, in order
 * @n: their number
 * @out: the digest, crypto_shash_digestsize(@tfm) bytes
 *
 * Return: 0 or the error of the crypto API.
 */
int puma_digest(struct crypto_shash *tfm, const void *prefix,
		size_t prefix_len, const struct kvec *parts, unsigned int n,
		u8 *out)
{
	SHASH_DESC_ON_STACK(desc, tfm);
	unsigned int i;
	int ret;

	desc->tfm = tfm;
	ret = crypto_shash_init(desc);
	if (!ret && prefix_len)
		ret = crypto_shash_update(desc, prefix, prefix_len);
	for (i = 0; !ret && i < n; i++)
		ret = crypto_shash_update(desc, parts[i].iov_base,
					  parts[i].iov_len);
	if (!ret)
		ret = crypto_shash_final(desc, out);
	shash_desc_zero(desc);
	return ret;
}

/* HMAC-SHA256 with @key of the @n pieces of @parts into @out. */
static int puma_hmac(struct crypto_shash *tfm, const u8 *key,
		     unsigned int key_len, const struct kvec *parts,
		     unsigned int n, u8 *out)
{
	return crypto_shash_setkey(tfm, key, key_len) ?:
	       puma_digest(tfm, NULL, 0, parts, n, out);
}

/*
 * The AUTH proof of the borrower (@lender false) or of the lender:
 * HMAC-SHA256(key, "puma2-<role>" || borrower's HELLO || lender's HELLO).
 */
static int puma_proof(struct puma_peer *p, struct crypto_shash *tfm,
		      const u8 *key, unsigned int key_len, bool lender,
		      u8 *out)
{
	const char *label = lender ? "puma2-lender" : "puma2-borrower";
	struct kvec parts[] = {
		{ .iov_base = (void *)label, .iov_len = strlen(label) },
		{ .iov_base = &p->hello[0], .iov_len = sizeof(p->hello[0]) },
		{ .iov_base = &p->hello[1], .iov_len = sizeof(p->hello[1]) },
	};

	return puma_hmac(tfm, key, key_len, parts, ARRAY_SIZE(parts), out);
}

/*
 * Per-connection keys, one per direction (HKDF-SHA256, RFC 5869, one
 * output block): PRK = HMAC(borrower nonce || lender nonce, pair key),
 * key = HMAC(PRK, "puma2 borrower->lender" or "puma2 lender->borrower" ||
 * 0x01).  Sets p->tx_tfm and p->rx_tfm to HMAC-SHA256 with them.
 */
static int puma_session_keys(struct puma_peer *p, struct crypto_shash *tfm,
			     const u8 *key, unsigned int key_len)
{
	static const char *const labels[2] = { "puma2 borrower->lender\x01",
					       "puma2 lender->borrower\x01" };
	u8 salt[2 * PUMA_NONCE_LEN], prk[SHA256_DIGEST_SIZE];
	u8 dkey[2][SHA256_DIGEST_SIZE];
	struct crypto_shash *t[2] = { };
	struct kvec part;
	int i, ret;

	memcpy(salt, p->hello[0].nonce, PUMA_NONCE_LEN);
	memcpy(salt + PUMA_NONCE_LEN, p->hello[1].nonce, PUMA_NONCE_LEN);
	part.iov_base = (void *)key;
	part.iov_len = key_len;
	ret = puma_hmac(tfm, salt, sizeof(salt), &part, 1, prk);
	for (i = 0; !ret && i < 2; i++) {
		part.iov_base = (void *)labels[i];
		part.iov_len = strlen(labels[i]);
		ret = puma_hmac(tfm, prk, sizeof(prk), &part, 1, dkey[i]);
	}
	for (i = 0; !ret && i < 2; i++) {
		t[i] = crypto_alloc_shash("hmac(sha256)", 0, 0);
		if (IS_ERR(t[i])) {
			ret = PTR_ERR(t[i]);
			t[i] = NULL;
		} else {
			ret = crypto_shash_setkey(t[i], dkey[i],
						  sizeof(dkey[i]));
		}
	}
	memzero_explicit(prk, sizeof(prk));
	memzero_explicit(dkey, sizeof(dkey));
	if (ret) {
		crypto_free_shash(t[0]);
		crypto_free_shash(t[1]);
		return ret;
	}
	/* t[0]: borrower -> lender. */
	mutex_lock(&p->tx_mutex);
	p->tx_tfm = t[p->lender_side];
	p->tx_ctr = 2;
	mutex_unlock(&p->tx_mutex);
	p->rx_tfm = t[!p->lender_side];
	p->rx_ctr = 2;
	return 0;
}

/* The key of this pair: its own, else the default one. */
static unsigned int puma_pair_key(struct puma_peer *p, u8 *key)
{
	if (p->key_len) {	/* a borrower's, or either side of shm */
		memcpy(key, p->key, p->key_len);
		return p->key_len;
	}
	if (p->lender_side)
		return puma_borrower_key_copy(&p->addr, key);
	return puma_key_copy(key);
}

/* Both ways: receive the peer's AUTH and check its proof. */
static int puma_check_proof(struct puma_peer *p, struct crypto_shash *tfm,
			    const u8 *key, unsigned int key_len)
{
	u8 want[PUMA_MAC_LEN];
	struct puma_hdr h;
	int ret;

	ret = puma_recv_msg(p, &h, false);
	if (ret)
		return ret;
	if (puma_proof(p, tfm, key, key_len, !p->lender_side, want))
		ret = PUMA_ERR_IO;
	else if (crypto_memneq(want, p->hsbuf, PUMA_MAC_LEN))
		ret = PUMA_ERR_AUTH;
	memzero_explicit(want, sizeof(want));
	return ret;
}

static int puma_send_proof(struct puma_peer *p, struct crypto_shash *tfm,
			   const u8 *key, unsigned int key_len)
{
	struct puma_auth auth;
	int ret = PUMA_OK;

	if (puma_proof(p, tfm, key, key_len, p->lender_side, auth.mac))
		ret = PUMA_ERR_IO;
	else if (puma_send_small(p, PUMA_MSG_AUTH, 0, &auth, sizeof(auth)))
		ret = PUMA_ERR_IO;
	memzero_explicit(&auth, sizeof(auth));
	return ret;
}

/*
 * HELLO both ways; the borrower's AUTH, checked by the lender; only then
 * the lender's AUTH, checked by the borrower; then the per-direction keys.
 * The whole exchange must be over by p->hs_deadline.
 */
int puma_handshake(struct puma_peer *p)
{
	bool lender = p->lender_side;
	struct puma_hello *mine = &p->hello[lender];
	struct crypto_shash *tfm;
	u8 key[sizeof(puma_cfg.key)];
	unsigned int key_len;
	struct puma_hdr h;
	int ret;

	p->rx.seq = 0;
	p->rx.phase = PUMA_PHASE_HELLO;
	p->rx.my_role = lender ? PUMA_ROLE_LENDER : PUMA_ROLE_BORROWER;
	p->tx_seq = 0;
	p->hs_deadline = jiffies +
			 msecs_to_jiffies(READ_ONCE(handshake_timeout_ms));
	memset(mine, 0, sizeof(*mine));
	mine->magic = cpu_to_le32(PUMA_PROTO_MAGIC);
	mine->version_min = cpu_to_le16(PUMA_PROTO_VERSION);
	mine->version_max = cpu_to_le16(PUMA_PROTO_VERSION);
	mine->role = cpu_to_le16(p->rx.my_role);
	get_random_bytes(mine->nonce, sizeof(mine->nonce));
	strscpy(mine->name, utsname()->nodename, sizeof(mine->name));
	if (puma_send_small(p, PUMA_MSG_HELLO, 0, mine, sizeof(*mine)))
		return PUMA_ERR_IO;

	ret = puma_recv_msg(p, &h, false);
	if (ret)
		return ret;
	memcpy(&p->hello[!lender], p->hsbuf, sizeof(p->hello[0]));

	key_len = puma_pair_key(p, key);
	if (!key_len)
		return PUMA_ERR_NOKEY;
	tfm = crypto_alloc_shash("hmac(sha256)", 0, 0);
	if (IS_ERR(tfm)) {
		ret = PUMA_ERR_IO;
		goto out_zero;
	}
	if (lender) {
		/* Nothing keyed leaves before the borrower proved the key. */
		ret = puma_check_proof(p, tfm, key, key_len) ?:
		      puma_send_proof(p, tfm, key, key_len);
	} else {
		ret = puma_send_proof(p, tfm, key, key_len) ?:
		      puma_check_proof(p, tfm, key, key_len);
	}
	if (!ret && puma_session_keys(p, tfm, key, key_len))
		ret = PUMA_ERR_IO;
	crypto_free_shash(tfm);
out_zero:
	memzero_explicit(key, sizeof(key));
	if (ret)
		return ret;
	/* Only now the big buffers: an unauthenticated peer costs little. */
	if (!p->rxbuf)
		p->rxbuf = kvmalloc(PUMA_MSG_MAX_LEN, GFP_KERNEL);
	if (lender && !p->replybuf)
		p->replybuf = kvmalloc(PUMA_MSG_MAX_LEN, GFP_KERNEL);
	if (!p->rxbuf || (lender && !p->replybuf))
		return PUMA_ERR_IO;
	p->rx.phase = PUMA_PHASE_READY;
	return PUMA_OK;
}
