# SPDX-License-Identifier: Apache-2.0
"""The caching half of lab/bench ksm: host page cache per cache mode.

For each cache mode (host_cache.MODES) L2 guests boot in one kernel host
with a fresh data disk each, in that mode.  Each guest makes an ext4 on
it and writes FILES files of FILE_MB MiB of random data (their SHA-256
kept), and unmounts it; the kernel host then writes back and drops its
page cache, and the measured part starts in every guest at once:

1. ``read``: the files read ROUNDS times (the first from the disk, the
   others from the guest's page cache), then checked against their
   SHA-256; the kernel host's page cache of each image is read with
   ``fincore`` right after (``host_cache_mb``, the guests summed);
2. ``reread``: the guest drops its own page cache and reads the files
   once more: from the kernel host's page cache if it kept them, else
   from the disk (what exclusive caching gives up).

Throughputs are the guests' bytes over the slowest guest's time.
"""

import re
import time

from puma_lab import host_cache
from puma_lab import kernel_host

PREPARE = host_cache.FIND_DEVICE + (
    'set -e; mkfs.ext4 -q -F "$dev"; mkdir -p /mnt/data; '
    'mount "$dev" /mnt/data; '
    'for i in $(seq %(files)d); do '
    'head -c %(mb)dM /dev/urandom > /mnt/data/f$i; done; '
    'cd /mnt/data && sha256sum f* > /root/data.sha; cd /; '
    'umount /mnt/data')
MEASURE = host_cache.FIND_DEVICE + (
    'set -e; mount "$dev" /mnt/data; cd /mnt/data; '
    't0=$(date +%%s.%%N); '
    'for r in $(seq %(rounds)d); do cat f* > /dev/null; done; '
    't1=$(date +%%s.%%N); '
    'sha256sum -c --quiet /root/data.sha; '
    'echo "read $t0 $t1"')
# Not a %-template as the two above: its % signs are the shell's.
REREAD = (
    'set -e; cd /mnt/data; sync; echo 3 > /proc/sys/vm/drop_caches; '
    't0=$(date +%s.%N); cat f* > /dev/null; t1=$(date +%s.%N); '
    'sha256sum -c --quiet /root/data.sha; echo "reread $t0 $t1"; '
    'cd /; umount /mnt/data')
TIMES = re.compile(r'^(read|reread) ([0-9.]+) ([0-9.]+)$', re.M)


def _elapsed(out, what):
    for m in TIMES.finditer(out):
        if m.group(1) == what:
            return float(m.group(3)) - float(m.group(2))
    raise AssertionError('no %s time in %r' % (what, out))


def _parallel(guests, script, timeout):
    """SCRIPT in every guest at once; their outputs."""
    pids = [g.spawn(script) for g in guests]
    outs = []
    for g, pid in zip(guests, pids):
        res = g.wait(pid, timeout=timeout)
        if res.rc != 0:
            raise AssertionError('%s: rc %d: %s %s'
                                 % (g.name, res.rc, res.out, res.err))
        outs.append(res.out)
    return outs


def measure(kh, mode, guests_n, kernel, mem_mb, files, file_mb, rounds,
            log):
    """The figures of MODE on kernel host KH (its data disk mounted)."""
    guests = []
    total_mb = guests_n * files * file_mb
    try:
        for i in range(guests_n):
            img = host_cache.make_image(kh, 'c%d' % i,
                                        files * file_mb * 2 + 64)
            g = kernel_host.NestedGuest(kh, 'c%d' % i, kernel=kernel,
                                        mem_mb=mem_mb, data=(img, mode))
            g.start().wait_booted()
            g.image = img
            guests.append(g)
        _parallel(guests, PREPARE % {'files': files, 'mb': file_mb}, 900)
        host_cache.drop_host_cache(kh)
        t = time.monotonic()
        outs = _parallel(guests, MEASURE % {'rounds': rounds}, 1800)
        read_s = max(_elapsed(o, 'read') for o in outs)
        cached = sum(host_cache.cached_bytes(kh, g.image) for g in guests)
        outs = _parallel(guests, REREAD, 1800)
        reread_s = max(_elapsed(o, 'reread') for o in outs)
        log('cache %s: read %d MiB x %d in %.1f s, host cache %.1f MiB, '
            'reread in %.1f s (%.0f s in all)'
            % (mode, total_mb, rounds, read_s, cached / 2**20, reread_s,
               time.monotonic() - t))
    finally:
        for g in guests:
            g.stop()
    return {'host_cache_mb': round(cached / 2**20, 1),
            'read_s': round(read_s, 2),
            'read_mb_s': round(total_mb * rounds / read_s, 1),
            'reread_s': round(reread_s, 2),
            'reread_mb_s': round(total_mb / reread_s, 1),
            'data_mb': total_mb}


def figures(results):
    """Flat figures of RESULTS (mode -> measure()) and the issue's ratios."""
    fig = {}
    for mode, r in results.items():
        for key, value in r.items():
            fig['cache_%s_%s' % (mode, key)] = value
    ex, wb, none = (results.get(m) for m in ('exclusive', 'writeback',
                                             'none'))
    if ex and wb:
        if wb['host_cache_mb']:
            fig['host_cache_x_writeback'] = round(
                ex['host_cache_mb'] / wb['host_cache_mb'], 3)
        fig['throughput_x_writeback'] = round(
            ex['read_mb_s'] / wb['read_mb_s'], 2)
        fig['reread_x_writeback'] = round(
            ex['reread_mb_s'] / wb['reread_mb_s'], 2)
    if ex and none:
        fig['throughput_x_none'] = round(ex['read_mb_s'] / none['read_mb_s'],
                                         2)
    return fig
