// SPDX-License-Identifier: GPL-2.0
/*
 * Seal: the borrower's pages are encrypted and authenticated before they
 * leave, so a lender (another tenant's VM) can neither read nor alter
 * them, swap them between slots, nor serve an older copy.
 *
 * AES-256-GCM from the kernel crypto API ("gcm(aes)"), with a key drawn
 * with get_random_bytes() when the guest first becomes a borrower (role
 * borrower or both, or a first lender added), kept until unload: it never
 * leaves this module, is never sent nor shown, and is wiped at unload.
 * A lender needs none of this.  Each put is sealed under a fresh
 * version, a 64-bit counter that only grows (puma_seal_version()), so a
 * nonce never repeats under the key: the nonce is a constant 32-bit word
 * and the version.  The associated data binds the blob to the page it was
 * sealed for and to that very put: (pool epoch, inode number, inode
 * generation, page index, version).  The index records the version of
 * each put (index.c), and a get expects exactly that version back; so a
 * byte changed by the lender, the blob of another page or file, or the
 * blob of an earlier put of the same page all fail the tag check, and the
 * borrower reads the disk instead (get.c).
 *
 * What the lender holds is PUMA_BLOB_BYTES: the ciphertext of the page
 * and the tag.  The nonce is not sent: the borrower rebuilds it from the
 * version its index records.
 *
 * Costs are counted for the stats: seals and opens done, and the
 * nanoseconds they took (seal_ns, open_ns), so that the CPU price per put
 * and per get can be read off a running borrower.
 *
 * Implementation: one transform for the module, set once under
 * puma_seal_mutex and never changed until unload; each caller brings a
 * struct puma_seal_ctx (heap memory: scatterlists may not point into a
 * virtually mapped stack) that holds the request, the associated data and
 * the nonce.  Callers sleep: the send worker seals, the reading task
 * opens.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <crypto/aead.h>
#include <linux/highmem.h>
#include <linux/random.h>
#include <linux/ratelimit.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/timekeeping.h>

#include "puma.h"

#define PUMA_SEAL_ALG		"gcm(aes)"
#define PUMA_SEAL_KEY_LEN	32	/* AES-256 */
#define PUMA_SEAL_IV_FIXED	0x50554d41	/* "PUMA" */
/* The index keeps a version in the bits of an xarray value above 9. */
#define PUMA_SEAL_VERSION_MAX	((1ULL << PUMA_SEAL_VERSION_BITS) - 1)

/*
 * What the tag covers besides the page: the page's identity, i.e. its key
 * as the protocol carries it (pool, ino, gen, 0, index), and its put.
 */
struct puma_seal_aad {
	struct puma_key key;
	__le64 version;
};

struct puma_seal_iv {
	__le32 fixed;
	__le64 version;
} __packed;

struct puma_seal_ctx {
	struct scatterlist sg[3];
	struct puma_seal_aad aad;
	struct puma_seal_iv iv;
	struct crypto_wait wait;
	struct aead_request req;	/* last: followed by its context */
};

static DEFINE_MUTEX(puma_seal_mutex);
static struct crypto_aead *puma_seal_tfm;	/* set once, then read-only */
static atomic64_t puma_seal_last = ATOMIC64_INIT(0);

/**
 * puma_seal_version - a version for a new put, never given before
 *
 * Caller: the put hook (any context).
 *
 * Return: the version, or 0 if the counter is used up (no put then).
 */
u64 puma_seal_version(void)
{
	u64 v = atomic64_inc_return(&puma_seal_last);

	return v <= PUMA_SEAL_VERSION_MAX ? v : 0;
}

/**
 * puma_seal_ctx_alloc - a context for seals or opens, one at a time
 * @gfp: allocation flags
 *
 * Return: the context (free with puma_seal_ctx_free()), or NULL (also
 * before puma_seal_ready() succeeded).
 */
struct puma_seal_ctx *puma_seal_ctx_alloc(gfp_t gfp)
{
	/* Pairs with the release in puma_seal_ready(): a keyed tfm. */
	struct crypto_aead *tfm = smp_load_acquire(&puma_seal_tfm);
	struct puma_seal_ctx *c;

	if (!tfm)
		return NULL;
	c = kzalloc(sizeof(*c) + crypto_aead_reqsize(tfm), gfp);
	if (!c)
		return NULL;
	aead_request_set_tfm(&c->req, tfm);
	return c;
}

void puma_seal_ctx_free(struct puma_seal_ctx *c)
{
	kfree_sensitive(c);
}

static void puma_seal_prepare(struct puma_seal_ctx *c,
			      const struct puma_key *k, u64 version)
{
	c->aad.key = *k;
	c->aad.version = cpu_to_le64(version);
	c->iv.fixed = cpu_to_le32(PUMA_SEAL_IV_FIXED);
	c->iv.version = cpu_to_le64(version);
	crypto_init_wait(&c->wait);
	aead_request_set_callback(&c->req, CRYPTO_TFM_REQ_MAY_SLEEP |
				  CRYPTO_TFM_REQ_MAY_BACKLOG,
				  crypto_req_done, &c->wait);
	aead_request_set_ad(&c->req, sizeof(c->aad));
}

/**
 * puma_seal_page - encrypt and authenticate a page in place
 * @c: a context from puma_seal_ctx_alloc()
 * @k: the page's key, as it is sent with the blob
 * @version: the put's version, from puma_seal_version(), used once
 * @blob: PUMA_BLOB_BYTES of directly mapped memory (kmalloc): the page
 *	  on entry, ciphertext and tag on return
 *
 * Caller may sleep.
 *
 * Return: 0 or -errno (then @blob must not be sent).
 */
int puma_seal_page(struct puma_seal_ctx *c, const struct puma_key *k,
		   u64 version, u8 *blob)
{
	u64 t0 = ktime_get_ns();
	int ret;

	puma_seal_prepare(c, k, version);
	sg_init_table(c->sg, 2);
	sg_set_buf(&c->sg[0], &c->aad, sizeof(c->aad));
	sg_set_buf(&c->sg[1], blob, PUMA_BLOB_BYTES);
	aead_request_set_crypt(&c->req, c->sg, c->sg, PUMA_PAGE_BYTES,
			       (u8 *)&c->iv);
	ret = crypto_wait_req(crypto_aead_encrypt(&c->req), &c->wait);
	puma_count_n(PUMA_STAT_SEAL_NS, ktime_get_ns() - t0);
	puma_count(PUMA_STAT_SEALS);
	return ret;
}

/**
 * puma_open_page - check and decrypt a lender's blob in place
 * @c: a context from puma_seal_ctx_alloc()
 * @fk: the file the page was asked for
 * @index: the page index
 * @version: the version the index recorded for the put of this page
 * @page: the ciphertext on entry (the page-cache page, locked, not up to
 *	  date); the page's data on success, zeroes on failure
 * @tag: the PUMA_SEAL_TAG_LEN bytes that came with it (kmalloc memory)
 *
 * Caller may sleep.  A failed check is counted (auth_failures) and logged,
 * rate limited; the caller reads the page from the disk.
 *
 * Return: true if the blob is the one sealed for exactly this put.
 */
bool puma_open_page(struct puma_seal_ctx *c, const struct puma_fkey *fk,
		    pgoff_t index, u64 version, struct page *page,
		    const u8 *tag)
{
	struct puma_key k = {
		.pool = cpu_to_le64(fk->pool),
		.ino = cpu_to_le64(fk->ino),
		.gen = cpu_to_le32(fk->gen),
		.index = cpu_to_le64(index),
	};
	u64 t0 = ktime_get_ns();
	int ret;

	puma_seal_prepare(c, &k, version);
	sg_init_table(c->sg, 3);
	sg_set_buf(&c->sg[0], &c->aad, sizeof(c->aad));
	sg_set_page(&c->sg[1], page, PUMA_PAGE_BYTES, 0);
	sg_set_buf(&c->sg[2], tag, PUMA_SEAL_TAG_LEN);
	aead_request_set_crypt(&c->req, c->sg, c->sg, PUMA_BLOB_BYTES,
			       (u8 *)&c->iv);
	ret = crypto_wait_req(crypto_aead_decrypt(&c->req), &c->wait);
	puma_count_n(PUMA_STAT_OPEN_NS, ktime_get_ns() - t0);
	puma_count(PUMA_STAT_OPENS);
	if (!ret)
		return true;
	/* Never leave what a lender made up in a page-cache page. */
	memzero_page(page, 0, PUMA_PAGE_BYTES);
	puma_count(PUMA_STAT_AUTH_FAILURES);
	pr_warn_ratelimited("page %llx:%llu:%u:%lu v%llu from a lender failed its check (%d): read from disk\n",
			    fk->pool, fk->ino, fk->gen, index, version, ret);
	return false;
}

static int puma_seal_setup(void)
{
	struct crypto_aead *tfm;
	u8 key[PUMA_SEAL_KEY_LEN];
	int ret;

	BUILD_BUG_ON(sizeof(struct puma_seal_iv) != 12);
	tfm = crypto_alloc_aead(PUMA_SEAL_ALG, 0, 0);
	if (IS_ERR(tfm)) {
		ret = PTR_ERR(tfm);
		pr_err("cannot seal pages: no %s in this kernel (%d)\n",
		       PUMA_SEAL_ALG, ret);
		return ret;
	}
	ret = -EINVAL;
	if (crypto_aead_ivsize(tfm) != sizeof(struct puma_seal_iv))
		goto out_free;
	get_random_bytes(key, sizeof(key));
	ret = crypto_aead_setkey(tfm, key, sizeof(key)) ?:
	      crypto_aead_setauthsize(tfm, PUMA_SEAL_TAG_LEN);
	memzero_explicit(key, sizeof(key));
	if (ret)
		goto out_free;
	pr_info("pages sealed with %s (%s)\n", PUMA_SEAL_ALG,
		crypto_tfm_alg_driver_name(crypto_aead_tfm(tfm)));
	/* Publish only a keyed tfm; pairs with puma_seal_ctx_alloc(). */
	smp_store_release(&puma_seal_tfm, tfm);
	return 0;

out_free:
	crypto_free_aead(tfm);
	return ret;
}

/**
 * puma_seal_ready - make sure the key and the transform exist
 *
 * The first call draws the key; later calls find it.  Process context.
 *
 * Return: 0, or -errno if the kernel has no usable AES-GCM (then this
 * guest cannot be a borrower).
 */
int puma_seal_ready(void)
{
	int ret = 0;

	mutex_lock(&puma_seal_mutex);
	if (!puma_seal_tfm)
		ret = puma_seal_setup();
	mutex_unlock(&puma_seal_mutex);
	return ret;
}

void puma_seal_exit(void)
{
	/* Frees the key schedule too (zeroed by the crypto API). */
	if (puma_seal_tfm)
		crypto_free_aead(puma_seal_tfm);
	puma_seal_tfm = NULL;
}
