# SPDX-License-Identifier: Apache-2.0
"""Cache lending against a modelled cloud disk (``./lab/bench puma``).

Under TCG a guest-to-guest round trip costs about 2 ms, tens of times
what it costs on KVM, while a disk emulated by QEMU answers from the
host's page cache.  The bench therefore models the disk explicitly
(:mod:`puma_lab.diskmodel`): the data disk is an image served by nbdkit
whose delay filter holds every read for the latency of a named device
class (``netvol``: a network SSD volume, 1 ms; ``hdd``: a hard disk,
8 ms) times the dilation factor, the lab's round trip (ping between the
borrower and the lender, measured at the start of the run) over a KVM
reference round trip (``--kvm-rtt-us``, 50 us by default).  Both guests
run in every case, so the machine's load is the same in each.

A borrower guest with BORROWER_MB of RAM reads a working set of WS_MB
(default twice its RAM); cases ``nopuma`` (the borrower alone) and
``puma`` (``puma.ko`` in both guests, the lender with LENDER_MB), and
optionally ``upper`` (a guest with borrower + lender RAM).  Each case
first reaches the caches' steady state with the disk at the lab's
round trip (never faster than the network)
(WARMUP_PASSES sequential passes, RANDOM_WARMUP seconds of unmeasured
random reads: what an application running for a while leaves in the
borrower's page cache and, with Puma, at the lender), then, per device
class, REPEATS runs of RUNTIME seconds of 4 KiB uniform random reads
(fio, psync), then the application workload (:mod:`puma_lab.appdb`:
SQLite point lookups in a database of APP_MB, about twice the borrower's
RAM, warmed up the same way first) REPEATS times on ``netvol``, then a
cold sequential scan of SEQ_MB on ``netvol``.  The Puma case also
measures one get: a region of GETLAT_MB is put to the lender (see
``get_latency``), then fio reads each of its blocks once, in random
order (at most RUNTIME seconds); its median completion latency is the latency
of a get as an application sees it, compared with the median ping round
trip (``get_p50_x_rtt``).  Per run it reports the gets and hits, and the
borrower's AEAD cost per opened page (``crypto_cpu_us_per_get``, from
the module's ``open_ns``/``opens`` counters; raw TCG CPU time).

Lender slowdown: the lender runs a memory-hungry program (``memverify
-t 0`` over HOG_SHARE of its RAM) before it lends anything (the second
of two runs: the first after boot is slower) and once while it hosts
the borrower's pages, after the get-latency phase and before the scan's
page-cache drop: ``lender_slowdown`` = hosting / idle.

Figures: raw lab figures per run (IOPS, latencies, queries/s, disk
reads from QEMU's block stats), their median and spread (min, max), and
the ratios of medians, which the model makes comparable with a cloud:
``random_x_nopuma_netvol``, ``random_x_nopuma_hdd``,
``app_x_nopuma_netvol``, ``seq_x_nopuma``, ``get_p50_x_rtt``,
``lender_slowdown``, ``crypto_cpu_us_per_get``.

Same-host transport (case ``shm``): both guests also have an
``ivshmem-doorbell`` device on one ``ivshmem-server``.  The borrower is
paired with the lender over TCP, then over the shared memory (never both
at once), alternately, REPEATS times; each time a region of SHM_GETLAT_MB
is put and read back block by block as for ``get_p50_x_rtt``
(``get_latency``).  ``shm_get_x_tcp`` is the median get latency (fio's
p50 completion latency) over shared memory over that over TCP, all in
the same run; the runs are kept (``getlat_p50_ms_tcp``,
``getlat_p50_ms_shm``).
Anything not measured is null, never a guess.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import sys

from puma_lab import appdb
from puma_lab import diskmodel
from puma_lab import errors
from puma_lab import ivshmem
from puma_lab import kmod
from puma_lab import lab as lab_mod
from puma_lab import paths
from puma_lab import vm

DATA = '/mnt/data/ws'
APP_DB = '/mnt/data/app.db'
CONTROL = '/sys/kernel/puma'
CONTROL_FILES = ('role', 'key', 'port', 'peers', 'seq_filter', 'stats')
PUMACTL = 'sh /mnt/host/pumactl'
KEY = 'bench-puma-shared-key'
PORT = 7400
CASES = ('nopuma', 'upper', 'puma', 'shm')
DEFAULT_CASES = ('nopuma', 'puma', 'shm')
DEVICES = ('netvol', 'hdd')
# The device the application and the sequential scan run on.
APP_DEVICE = 'netvol'
# Share of the lender's RAM its memory-hungry program takes.
HOG_SHARE = 0.7
# fio case name, fio arguments (the file and run time are added).  Random
# reads are uniform and independent from one run to the next: by default
# fio repeats the same sequence in every run and reads no block twice in
# one, so a measured run would re-read what its warm-up just cached.
FIO = {
    'random': '--rw=randread --bs=4k --ioengine=psync --time_based '
              '--randrepeat=0 --norandommap',
    # Every block of a region once, in random order, no repeat: after
    # get_latency() put the region to the lender, each read is a get.
    'getlat': '--rw=randread --bs=4k --ioengine=psync --randrepeat=0',
    'seq': '--rw=read --bs=128k --ioengine=psync',
}


def fio_figures(report):
    """IOPS, MiB/s and latency percentiles (ms) from fio's JSON REPORT."""
    read = report['jobs'][0]['read']
    pct = read['clat_ns']['percentile']
    return {'iops': round(read['iops'], 1),
            'mib_s': round(read['bw'] / 1024.0, 2),
            'p50_ms': round(pct['50.000000'] / 1e6, 3),
            'p99_ms': round(pct['99.000000'] / 1e6, 3)}


def _ratio(a, b):
    if a is None or b is None or not b:
        return None
    return round(a / b, 2)


def spread(values):
    """Median, min, max and the runs of VALUES (None when empty)."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {'median': round(statistics.median(values), 3),
            'min': min(values), 'max': max(values), 'runs': values}


def _median(meas, case, kind, key):
    runs = meas.get(case, {}).get(kind) or []
    fig = spread([r.get(key) for r in runs])
    return fig['median'] if fig else None


def summarize(meas, skipped, model):
    """The bench's figures from MEAS[case][kind] = [run figures, ...].

    KIND is ``random_<device>``, ``app``, ``seq`` or ``getlat``; MODEL
    says how the disk was modelled.  Anything not measured is None.
    """
    out = {'model': model}
    kinds = ['random_' + d for d in DEVICES] + ['app', 'seq', 'getlat']
    keys = {'app': ('qps', 'disk_reads', 'gets', 'hits',
                    'gets_skipped_rtt'),
            'getlat': ('p50_ms', 'p99_ms', 'gets', 'hits')}
    # The shm case has figures of its own (below), not these.
    for case in ('nopuma', 'upper', 'puma'):
        for kind in kinds:
            if kind == 'getlat' and case != 'puma':
                continue
            for key in keys.get(kind, ('iops', 'mib_s', 'p50_ms', 'p99_ms',
                                       'disk_reads', 'gets', 'hits',
                                       'gets_skipped_rtt')):
                if key in ('gets', 'hits', 'gets_skipped_rtt') and \
                        case != 'puma':
                    continue
                runs = meas.get(case, {}).get(kind) or []
                out['%s_%s_%s' % (kind, key, case)] = spread(
                    [r.get(key) for r in runs])
    for d in DEVICES:
        out['random_x_nopuma_' + d] = _ratio(
            _median(meas, 'puma', 'random_' + d, 'iops'),
            _median(meas, 'nopuma', 'random_' + d, 'iops'))
        out['random_x_upper_' + d] = _ratio(
            _median(meas, 'puma', 'random_' + d, 'iops'),
            _median(meas, 'upper', 'random_' + d, 'iops'))
    out['app_x_nopuma_' + APP_DEVICE] = _ratio(
        _median(meas, 'puma', 'app', 'qps'),
        _median(meas, 'nopuma', 'app', 'qps'))
    out['seq_x_nopuma'] = _ratio(_median(meas, 'puma', 'seq', 'mib_s'),
                                 _median(meas, 'nopuma', 'seq', 'mib_s'))
    rtt = meas.get('rtt_ms') or {}
    out['get_p50_x_rtt'] = _ratio(_median(meas, 'puma', 'getlat', 'p50_ms'),
                                  rtt.get('p50'))
    shm = meas.get('shm', {})
    for t in ('tcp', 'shm'):
        for key in ('p50_ms', 'p99_ms', 'gets', 'hits'):
            out['getlat_%s_%s' % (key, t)] = spread(
                [r.get(key) for r in shm.get('getlat_' + t) or []])
    out['shm_get_x_tcp'] = _ratio(_median(meas, 'shm', 'getlat_shm',
                                          'p50_ms'),
                                  _median(meas, 'shm', 'getlat_tcp',
                                          'p50_ms'))
    opens = meas.get('puma', {}).get('crypto') or {}
    out['crypto_cpu_us_per_get'] = (
        round(opens['open_ns'] / opens['opens'] / 1000.0, 2)
        if opens.get('opens') else None)
    out['crypto_cpu_us_per_put'] = (
        round(opens['seal_ns'] / opens['seals'] / 1000.0, 2)
        if opens.get('seals') else None)
    reclaim = meas.get('puma', {}).get('reclaim', {})
    for key in ('alloc_idle_s', 'alloc_hosting_s', 'hosted_before',
                'hosted_after', 'lend_shrunk', 'lend_suspends'):
        out['lender_' + key] = reclaim.get(key)
    out['lender_slowdown'] = _ratio(reclaim.get('alloc_hosting_s'),
                                    reclaim.get('alloc_idle_s'))
    out['net_rtt_ms'] = rtt or None
    out['puma_stats'] = meas.get('puma', {}).get('stats')
    out['skipped'] = dict(skipped)
    return out


def disk_reads(g):
    """Read requests the guest's data disk (d1) has completed."""
    for dev in g.qmp('query-blockstats'):
        if dev.get('device') == 'd1':
            return dev['stats']['rd_operations']
    raise errors.LabError('guest %s has no data disk d1' % g.name)


def fio(g, kind, args, runtime=None, size_mb=None):
    """Run one fio case in G from a page cache prepared by the caller."""
    argv = ('fio --name=%s --filename=%s --readonly --invalidate=0 '
            '--output-format=json %s'
            % (kind, DATA, FIO[kind.split('_')[0]]))
    if kind.startswith('seq'):
        argv += ' --size=%dM --runtime=%d' % (size_mb or args.ws_mb,
                                              4 * args.runtime)
    else:
        argv += ' --runtime=%d' % (runtime or args.runtime)
        if size_mb:
            argv += ' --size=%dM' % size_mb
    before = disk_reads(g)
    res = g.run(argv, timeout=20 * (runtime or args.runtime) + 600)
    fig = fio_figures(json.loads(res.out[res.out.index('{'):]))
    fig['disk_reads'] = disk_reads(g) - before
    print('%s %s: %s' % (g.name, kind, fig), file=sys.stderr)
    return fig


def drop_caches(g):
    g.run('sync; echo 3 > /proc/sys/vm/drop_caches')


def warm_up(g, args, passes=None, path=DATA, drop=True):
    """Sequential passes in large requests: the cache keeps what fits."""
    if drop:
        drop_caches(g)
    g.run('echo 2048 > /sys/block/vdb/queue/read_ahead_kb && '
          'for i in $(seq %d); do cat %s > /dev/null; done; '
          'echo 128 > /sys/block/vdb/queue/read_ahead_kb'
          % (passes or args.warmup_passes, path),
          timeout=20 * args.runtime + 600)


def random_warm_up(g, args):
    """Unmeasured random reads, to reach the caches' steady state."""
    if args.random_warmup:
        fio(g, 'random', args, runtime=args.random_warmup)


def boot(lab, name, args, mem_mb, disks, share=None, nics=0, server=None):
    return vm.Guest(lab, name, kernel=args.kernel, mem_mb=mem_mb, vcpus=2,
                    disks=disks, share=share, nics=nics,
                    ivshmem=server).start()


def mount(g):
    g.run('mkdir -p /mnt/data && mount -o ro,noload /dev/vdb /mnt/data')
    size = int(g.run('stat -c %%s %s' % DATA).out)
    return size


def puma_missing(g):
    """Why the loaded puma.ko cannot run the case, or None."""
    missing = [f for f in CONTROL_FILES
               if g.run('test -e %s/%s' % (CONTROL, f), check=False).rc]
    if missing:
        return ('puma.ko (version %s) has no control interface: %s missing'
                % (g.run('cat %s/version' % CONTROL, check=False).out.strip()
                   or '?', ', '.join('%s/%s' % (CONTROL, f)
                                     for f in missing)))
    return None


def pumactl(g, *args):
    return g.run(' '.join((PUMACTL,) + args)).out


def puma_stats(g):
    """The module's counters: ``name value`` lines of pumactl stats."""
    return {k: int(v) for k, v in
            (line.split() for line in pumactl(g, 'stats').splitlines())
            if v.isdigit()}


def lender_hog(g, args):
    """Seconds the lender takes to populate, fill and check its hog."""
    mib = int(args.lender_mb * HOG_SHARE)
    res = g.run('s=$(date +%%s%%N); memverify -m %d -t 0 >/dev/null && '
                'echo $(( $(date +%%s%%N) - s ))' % mib,
                timeout=20 * args.runtime + 600)
    secs = int(res.out.split()[-1]) / 1e9
    print('%s hog of %d MiB: %.2f s' % (g.name, mib, secs), file=sys.stderr)
    return round(secs, 3)


def net_rtt_ms(g, ip, count=20):
    """Ping round trips from G to IP, ms: {'min', 'avg', 'max', 'p50'}."""
    out = g.run('ping -c %d -i 0.2 %s' % (count, ip)).out
    times = [float(t) for t in re.findall(r'time=([0-9.]+) ms', out)]
    if not times:
        raise errors.LabError('%s: no reply from %s: %s' % (g.name, ip, out))
    return {'min': min(times), 'avg': round(statistics.mean(times), 3),
            'max': max(times), 'p50': round(statistics.median(times), 3)}


def wait_ready(g, tries=120):
    for _ in range(tries):
        if ' ready' in pumactl(g, 'peers'):
            return
        g.run('sleep 0.5')
    raise errors.LabError('guest %s: no ready peer: %s'
                          % (g.name, pumactl(g, 'peers')))


def load_borrower(borrower, share, params=''):
    """insmod puma.ko PARAMS in BORROWER; None, or why it cannot serve."""
    for f in ('puma.ko', 'pumactl'):
        if not os.path.exists(os.path.join(share, f)):
            return 'guest-kmod builds or ships no %s' % f
    borrower.run(kmod.CRYPTO_LOAD)
    res = borrower.run('insmod /mnt/host/puma.ko %s' % params, check=False)
    if res.rc:
        return 'insmod puma.ko failed: %s' % res.err.strip()
    why = puma_missing(borrower)
    if why:
        borrower.run('rmmod puma')
    return why


def start_lender(lab, args, share):
    """Boot the lender guest with puma.ko loaded (not lending yet)."""
    lender = boot(lab, 'lender', args, args.lender_mb, [], share=share,
                  nics=1).wait_booted()
    lender.run('insmod /mnt/host/puma.ko')
    return lender


def settle_puts(lender, borrower, tries=240):
    """Wait until the lender has taken or refused every queued put."""
    for _ in range(tries):
        b, lent = puma_stats(borrower), puma_stats(lender)
        if ('queued=0' in pumactl(borrower, 'peers') and
                lent['lend_puts'] + lent['lend_drop_nomem'] +
                lent['lend_drop_capacity'] +
                lent['lend_drop_suspended'] >= b['puts']):
            return
        borrower.run('sleep 0.5')
    raise errors.LabError('puts did not reach the lender: %r %r'
                          % (puma_stats(borrower), puma_stats(lender)))


def pair(lender, borrower, puma_set=()):
    """Make LENDER lend to BORROWER and wait for the connection."""
    for g in (lender, borrower):
        pumactl(g, 'key', KEY)
    pumactl(lender, 'port', str(PORT))
    pumactl(lender, 'role', 'lender')
    for knob in puma_set:
        pumactl(borrower, 'set', *knob.split('=', 1))
    pumactl(borrower, 'role', 'borrower')
    pumactl(borrower, 'peer', 'add',
            '%s:%d' % (lender.addrs[0].split('/')[0], PORT))
    wait_ready(borrower)


def working_set_dir(lab, mb):
    """A folder of the lab holding ``ws``, MB of random bytes."""
    files = lab.path('ws')
    os.makedirs(files)
    with open(os.path.join(files, 'ws'), 'wb') as f:
        for _ in range(mb):
            f.write(os.urandom(1024 * 1024))
    return files


def make_disk(lab, args):
    files = working_set_dir(lab, args.ws_mb)
    disk = vm.make_data_disk(lab.path('data.img'), args.ws_mb + 96, files)
    shutil.rmtree(files)
    disk.readonly = True
    disk.iops = args.iops
    return disk


def make_image(lab, args):
    """The data disk's image: the working set file and the database."""
    files = working_set_dir(lab, args.ws_mb)
    rows = appdb.make(os.path.join(files, 'app.db'), args.app_mb)
    size = os.path.getsize(os.path.join(files, 'app.db')) // (1024 * 1024)
    image = lab.path('data.img')
    vm.make_data_disk(image, args.ws_mb + size + 128, files)
    shutil.rmtree(files)
    return image, rows


def stats_delta(g, before, keys):
    after = puma_stats(g)
    return {k: after.get(k, 0) - before.get(k, 0) for k in keys}


def measured_runs(g, args, disk, delays, puma=False):
    """Per device class, REPEATS random runs; then the app, then a scan."""
    out = {}
    keys = ('gets', 'hits', 'gets_skipped_rtt', 'opens', 'open_ns', 'seals',
            'seal_ns')
    crypto = dict.fromkeys(keys[3:], 0)
    for dev in DEVICES:
        disk.set_delay(delays[dev])
        runs = []
        for _ in range(args.repeats):
            before = puma_stats(g) if puma else None
            fig = fio(g, 'random_' + dev, args)
            if puma:
                d = stats_delta(g, before, keys)
                fig.update((k, d[k]) for k in keys[:3])
                for k in crypto:
                    crypto[k] += d[k]
            runs.append(fig)
        out['random_' + dev] = runs
    # The application: its own warm-up, at the warm-up delay (passes
    # over the database, then queries), then measured.
    disk.set_delay(delays['warmup'])
    if puma:
        pumactl(g, 'set', 'seq_filter', '0')
    warm_up(g, args, path=APP_DB, drop=False)
    if puma:
        pumactl(g, 'set', 'seq_filter', '1')
    appdb.run(g, APP_DB, args.rows, args.app_warmup)
    disk.set_delay(delays[APP_DEVICE])
    out['app'] = []
    for _ in range(args.repeats):
        before = disk_reads(g), puma and puma_stats(g)
        qps = appdb.run(g, APP_DB, args.rows, args.runtime)
        fig = {'qps': qps, 'disk_reads': disk_reads(g) - before[0]}
        if puma:
            fig.update(stats_delta(g, before[1], keys[:3]))
        print('%s app: %s' % (g.name, fig), file=sys.stderr)
        out['app'].append(fig)
    if puma:
        out['crypto'] = crypto
    return out


def cold_scan(g, args):
    drop_caches(g)
    return [fio(g, 'seq', args, size_mb=args.seq_mb)]


def nopuma_case(b, args, disk, delays):
    disk.set_delay(delays['warmup'])
    warm_up(b, args)
    random_warm_up(b, args)
    out = measured_runs(b, args, disk, delays)
    disk.set_delay(delays[APP_DEVICE])
    out['seq'] = cold_scan(b, args)
    return out


def get_latency(lender, b, args, disk, delay_ms, mb=None):
    """A region put to the lender page by page; each read of it is a get.

    A page-cache drop would evict faster than the put buffers drain (the
    puts it cannot buffer are dropped), so the region is cached, then
    evicted one put-buffer's worth at a time (``dd iflag=nocache``:
    POSIX_FADV_DONTNEED over 4 MiB), each chunk's puts settled before
    the next.  fio then reads each block of the region once, in random
    order, with the disk at DELAY_MS: the gets that hit are what the
    median measures (``gets`` and ``hits`` say how many).
    """
    mb = mb or args.getlat_mb
    chunks = mb // 4
    pumactl(b, 'set', 'seq_filter', '0')
    disk.set_delay(0)
    b.run('dd if=%s of=/dev/null bs=4M count=%d' % (DATA, chunks),
          timeout=600)
    for k in range(chunks):
        b.run('dd if=%s of=/dev/null bs=4M skip=%d count=1 iflag=nocache'
              % (DATA, k))
        settle_puts(lender, b)
    pumactl(b, 'set', 'seq_filter', '1')
    disk.set_delay(delay_ms)
    before = puma_stats(b)
    fig = fio(b, 'getlat', args, size_mb=mb)
    fig.update(stats_delta(b, before, ('gets', 'hits')))
    return [fig]


def shm_case(b, lender, args, disk, delays):
    """Gets over TCP, then over shared memory, alternately, REPEATS times.

    The borrower has one lender at a time (a put goes to any ready one):
    the TCP peer is removed before the shared memory pairing is made,
    and back.  Removing a pairing forgets its pages on both sides, so
    each measurement starts with the region put over its own transport.
    """
    ip = lender.addrs[0].split('/')[0]
    if ' ready' not in pumactl(b, 'peers'):
        pair(lender, b, args.puma_set)
    pumactl(lender, 'shm', 'lend', ivshmem.PCI_ADDR, KEY)
    out = {'getlat_tcp': [], 'getlat_shm': []}
    for r in range(args.repeats):
        for t in ('tcp', 'shm'):
            if t == 'shm':
                pumactl(b, 'peer', 'del', '%s:%d' % (ip, PORT))
                pumactl(b, 'shm', 'borrow', ivshmem.PCI_ADDR, KEY)
            wait_ready(b)
            fig = get_latency(lender, b, args, disk, delays[APP_DEVICE],
                              mb=args.shm_getlat_mb)[0]
            fig['peers'] = pumactl(b, 'peers').strip()
            print('get over %s, round %d: %s' % (t, r, fig),
                  file=sys.stderr)
            out['getlat_' + t].append(fig)
            if t == 'shm':
                pumactl(b, 'shm', 'del', ivshmem.PCI_ADDR)
                pumactl(b, 'peer', 'add', '%s:%d' % (ip, PORT))
    return out


def puma_case(b, lender, args, disk, delays):
    """The borrower with puma.ko, paired with LENDER."""
    reclaim = {'alloc_idle_s': lender_hog(lender, args)}
    pair(lender, b, args.puma_set)
    # The warm-up passes are sequential: with the filter on, nothing
    # they evict would reach the lender.
    disk.set_delay(delays['warmup'])
    pumactl(b, 'set', 'seq_filter', '0')
    warm_up(b, args)
    pumactl(b, 'set', 'seq_filter', '1')
    random_warm_up(b, args)
    out = measured_runs(b, args, disk, delays, puma=True)
    out['getlat'] = get_latency(lender, b, args, disk, delays[APP_DEVICE])
    # The lender now hosts the borrower's pages (before the scan's page
    # cache drop, which evicts the files' inodes and with them their
    # remote pages); its own program needs the memory.
    before = puma_stats(lender)
    reclaim['hosted_before'] = before.get('hosted_pages')
    reclaim['alloc_hosting_s'] = lender_hog(lender, args)
    after = puma_stats(lender)
    reclaim['hosted_after'] = after.get('hosted_pages')
    for key in ('lend_shrunk', 'lend_suspends'):
        reclaim[key] = after.get(key, 0) - before.get(key, 0)
    out['reclaim'] = reclaim
    disk.set_delay(delays[APP_DEVICE])
    out['seq'] = cold_scan(b, args)
    out['stats'] = {'borrower': puma_stats(b), 'lender': puma_stats(lender)}
    return out


def upper_case(lab, args, disk, delays):
    u = boot(lab, 'upper', args, args.borrower_mb + args.lender_mb,
             [disk.disk]).wait_booted()
    mount(u)
    disk.set_delay(delays['warmup'])
    warm_up(u, args)
    random_warm_up(u, args)
    out = {}
    for dev in DEVICES:
        disk.set_delay(delays[dev])
        out['random_' + dev] = [fio(u, 'random_' + dev, args)
                                for _ in range(args.repeats)]
    u.stop()
    return out


def parse_args(argv):
    ap = argparse.ArgumentParser(prog='lab/bench puma')
    ap.add_argument('--kernel', default='6.12', choices=paths.KERNELS)
    ap.add_argument('--borrower-mb', type=int, default=256)
    ap.add_argument('--lender-mb', type=int, default=1280)
    ap.add_argument('--ws-mb', type=int, default=0,
                    help='working set (default: 2 x borrower RAM)')
    ap.add_argument('--app-mb', type=int, default=0,
                    help='database size (default: 2 x borrower RAM)')
    ap.add_argument('--seq-mb', type=int, default=128,
                    help='size of the cold sequential scan')
    ap.add_argument('--getlat-mb', type=int, default=32,
                    help='region put page by page for the get latency')
    ap.add_argument('--shm-getlat-mb', type=int, default=8,
                    help='region put and read back per transport (shm)')
    ap.add_argument('--kvm-rtt-us', type=float, default=diskmodel.KVM_RTT_US,
                    help='reference round trip between two KVM guests')
    ap.add_argument('--runtime', type=int, default=30,
                    help='seconds of each measured run')
    ap.add_argument('--repeats', type=int, default=3,
                    help='measured runs per device class and case')
    ap.add_argument('--warmup-passes', type=int, default=3,
                    help='sequential passes over the working set first')
    ap.add_argument('--random-warmup', type=int, default=60,
                    help='seconds of unmeasured random reads before them')
    ap.add_argument('--app-warmup', type=int, default=60,
                    help='seconds of unmeasured queries before them')
    ap.add_argument('--puma-set', action='append', default=[],
                    metavar='NAME=VALUE',
                    help='pumactl set NAME VALUE on the borrower')
    ap.add_argument('--cases', default=','.join(DEFAULT_CASES),
                    help='comma-separated subset of %s' % ', '.join(CASES))
    args = ap.parse_args(argv)
    args.ws_mb = args.ws_mb or 2 * args.borrower_mb
    args.app_mb = args.app_mb or 2 * args.borrower_mb
    args.cases = args.cases.split(',')
    for knob in args.puma_set:
        if '=' not in knob:
            ap.error('--puma-set %r: NAME=VALUE expected' % knob)
    if not set(args.cases) <= set(CASES):
        ap.error('unknown case in %r (known: %s)'
                 % (','.join(args.cases), ', '.join(CASES)))
    if args.repeats < 1 or args.runtime < 1:
        ap.error('--repeats and --runtime must be positive')
    total = args.borrower_mb + args.lender_mb
    if not args.borrower_mb < args.ws_mb < total:
        ap.error('the working set must be larger than the borrower RAM '
                 'and smaller than borrower + lender RAM')
    if args.ws_mb + args.app_mb >= total:
        ap.error('working set + database must fit in borrower + lender RAM')
    return args


def prepare_share(lab, args, share, skipped):
    """puma.ko, pumactl and the crypto modules in SHARE (or why not)."""
    try:
        built = kmod.build(paths.kernel(args.kernel), lab.path('build'))
        for f in (os.path.join(built, 'puma.ko'),
                  os.path.join(kmod.KMOD_SRC, 'tools', 'pumactl')):
            if os.path.exists(f):
                shutil.copy(f, share)
        kmod.ship_crypto(paths.kernel(args.kernel), share)
    except errors.LabError as e:
        skipped['puma'] = 'guest-kmod does not build: %s' % e


def run(argv):
    args = parse_args(argv)
    meas, skipped, model = {}, {}, {}
    with lab_mod.Lab('bench-puma') as lab:
        share = lab.path('share')
        os.makedirs(share)
        image, args.rows = make_image(lab, args)
        prepare_share(lab, args, share, skipped)
        disk = diskmodel.ModelledDisk(lab, 'data', image).start()
        server = (ivshmem.IvshmemServer(lab).start()
                  if 'shm' in args.cases else None)
        b = boot(lab, 'borrower', args, args.borrower_mb, [disk.disk],
                 share=share, nics=1, server=server)
        lender = boot(lab, 'lender', args, args.lender_mb, [], share=share,
                      nics=1, server=server)
        b.wait_booted()
        lender.wait_booted()
        mount(b)
        ip = lender.addrs[0].split('/')[0]
        meas['rtt_ms'] = net_rtt_ms(b, ip, count=50)
        factor = diskmodel.dilation(meas['rtt_ms']['p50'] * 1000.0,
                                    args.kvm_rtt_us)
        delays = {d: round(diskmodel.modelled_ms(d, factor), 1)
                  for d in DEVICES}
        # Warm-ups read with the disk as fast as the lab's round trip,
        # never faster: a disk faster than the network (no cloud has
        # one) evicts pages faster than the borrower can put them.
        delays['warmup'] = max(1.0, round(meas['rtt_ms']['p50'], 1))
        model.update(kvm_rtt_us=args.kvm_rtt_us,
                     lab_rtt_p50_us=round(meas['rtt_ms']['p50'] * 1000.0),
                     dilation=round(factor, 2), device_ms=diskmodel.DEVICE_MS,
                     delay_ms=delays)
        print('disk model: %r' % model, file=sys.stderr)
        if 'nopuma' in args.cases:
            meas['nopuma'] = nopuma_case(b, args, disk, delays)
        if {'puma', 'shm'} & set(args.cases) and 'puma' not in skipped:
            why = load_borrower(b, share)
            if not why:
                lender.run('insmod /mnt/host/puma.ko')
            else:
                skipped['puma'] = why
                skipped['shm'] = why
        if 'puma' in args.cases and 'puma' not in skipped:
            # The first run after boot also pays for the guest's
            # first touches of its RAM: the case times the second.
            lender_hog(lender, args)
            meas['puma'] = puma_case(b, lender, args, disk, delays)
        if 'shm' in args.cases and 'shm' not in skipped:
            meas['shm'] = shm_case(b, lender, args, disk, delays)
        meas['rtt_ms_end'] = net_rtt_ms(b, ip, count=50)
        b.stop()
        lender.stop()
        if 'upper' in args.cases:
            meas['upper'] = upper_case(lab, args, disk, delays)
    for case in CASES:
        if case not in args.cases:
            skipped.setdefault(case, 'not requested (--cases)')
    for case, why in skipped.items():
        print('case %s skipped: %s' % (case, why), file=sys.stderr)
    fig = {'kernel': args.kernel, 'borrower_mb': args.borrower_mb,
           'lender_mb': args.lender_mb, 'ws_mb': args.ws_mb,
           'app_mb': args.app_mb, 'seq_mb': args.seq_mb,
           'runtime_s': args.runtime, 'repeats': args.repeats,
           'warmup_passes': args.warmup_passes,
           'random_warmup_s': args.random_warmup,
           'app_warmup_s': args.app_warmup}
    fig.update(summarize(meas, skipped, model))
    fig['net_rtt_ms_end'] = meas.get('rtt_ms_end')
    return fig
