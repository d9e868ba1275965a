# SPDX-License-Identifier: Apache-2.0
"""The demo's cache-lending part: a borrower and a lender guest.

A borrower with little RAM reads a file from an IOPS-limited disk, the
page cache drops it (the clean pages go to the lender), and a second read
is served by the lender: the demo prints both reads' time and the reads
that reached the borrower's disk, the module's counters and the file's
checksum both times.
"""

import argparse
import os
import shutil
import time

from puma_lab.benches import puma
from puma_lab import errors
from puma_lab import kmod
from puma_lab import lab as lab_mod
from puma_lab import paths

FILE_MB = 48


def timed_read(g):
    """Read the whole file: (seconds, disk reads, sha256)."""
    before = puma.disk_reads(g)
    t0 = time.monotonic()
    digest = g.run('sha256sum %s' % puma.DATA, timeout=900).out.split()[0]
    return time.monotonic() - t0, puma.disk_reads(g) - before, digest


def run(kernel):
    """Run the cache-lending demo; False if it went wrong."""
    args = argparse.Namespace(kernel=kernel, borrower_mb=256,
                              lender_mb=512, ws_mb=FILE_MB, iops=100,
                              runtime=30, puma_set=[])
    with lab_mod.Lab('demo-puma') as lab:
        share = lab.path('share')
        os.makedirs(share)
        try:
            built = kmod.build(paths.kernel(kernel), lab.path('build'))
        except errors.LabError as e:
            print('cache lending: FAILED, guest-kmod does not build: %s' % e)
            return False
        shutil.copy(os.path.join(built, 'puma.ko'), share)
        shutil.copy(os.path.join(kmod.KMOD_SRC, 'tools', 'pumactl'), share)
        # The borrower seals its pages with AES-GCM: ship the crypto
        # modules, for guest images made before lab/lib/image.sh listed
        # them (load_borrower() runs kmod.CRYPTO_LOAD), as the tests do.
        kmod.ship_crypto(paths.kernel(kernel), share)
        borrower = puma.boot(lab, 'borrower', args, args.borrower_mb,
                             [puma.make_disk(lab, args)], share=share,
                             nics=1).wait_booted()
        puma.mount(borrower)
        # drop_caches evicts the whole file at once: room for all of it
        # in flight (the default, 1024 pages, would drop the excess).
        why = puma.load_borrower(borrower, share,
                                 'put_buffers=%d' % (FILE_MB * 256))
        if why:
            print('cache lending: FAILED: %s' % why)
            return False
        lender = puma.start_lender(lab, args, share)
        # TCG guests on a shared host: a get can take tens of ms, more
        # than the RTT guard's default bound; the demo shows the data path.
        puma.pair(lender, borrower, ('rtt_guard_us=0',
                                     'get_timeout_us=5000000'))
        print('cache lending: borrower (%d MiB) and lender (%d MiB) guests '
              'paired over TCP; the borrower reads a %d MiB file from a '
              'disk limited to %d IOPS'
              % (args.borrower_mb, args.lender_mb, FILE_MB, args.iops))
        # Sequential reads are not put by default; the demo reads a file
        # from end to end, so it turns the filter off.
        puma.pumactl(borrower, 'set', 'seq_filter', '0')
        puma.drop_caches(borrower)
        cold_s, cold_reads, digest1 = timed_read(borrower)
        # Drop only the page cache: evicting the file's inode too would
        # drop its remote pages (never stale: docs/puma-never-stale.md).
        borrower.run('sync; echo 1 > /proc/sys/vm/drop_caches')
        puma.settle_puts(lender, borrower)
        lent = puma.puma_stats(lender)['hosted_pages']
        before = puma.puma_stats(borrower)
        warm_s, warm_reads, digest2 = timed_read(borrower)
        after = puma.puma_stats(borrower)
        print('first read: %.1f s, %d reads reached the disk; after '
              'drop_caches the lender hosts %d pages' %
              (cold_s, cold_reads, lent))
        print('second read: %.1f s, %d reads reached the disk; %d gets, '
              '%d hits, get round trip %d us'
              % (warm_s, warm_reads, after['gets'] - before['gets'],
                 after['hits'] - before['hits'], after['rtt_us']))
        same = digest1 == digest2
        print('sha256 of the file: %s both times' %
              ('the same' if same else 'NOT the same'))
        hits = after['hits'] > before['hits']
        print('RESULT: %s' % (
            'OK, the lender served the second read' if same and hits else
            'FAILED: %s' % ('the file changed' if not same else
                            'no page came from the lender')))
        return same and hits
