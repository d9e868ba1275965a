# SPDX-License-Identifier: Apache-2.0
"""Cache lending: random and sequential reads from an IOPS-limited disk.

A borrower guest with BORROWER_MB of RAM reads a working set of WS_MB
(default twice its RAM) from a virtio disk throttled to IOPS (a cloud
volume).  Cases, each after a page-cache drop, WARMUP_PASSES sequential
warm-up passes over the working set and RANDOM_WARMUP seconds of
unmeasured random reads (what an application running for a while leaves
in the caches: the borrower's page cache and, with Puma, the lender's;
reclaim during one fast pass outruns the network, and the puts it cannot
buffer are dropped, so the next pass puts what the last one dropped):

- ``nopuma``: the borrower alone;
- ``upper``: the upper bound, a borrower with BORROWER_MB + LENDER_MB;
- ``puma``: the borrower with puma.ko and a lender guest with LENDER_MB
  (WS_MB < BORROWER_MB + LENDER_MB), sequential filter on;

each measured with fio: 4 KiB random reads for RUNTIME seconds (``random``)
and, from a cold cache, a sequential scan of the working set (``seq``; for
Puma also with the filter off, ``seq_nofilter``).  Figures per case: IOPS,
MiB/s, p50/p99 completion latency, and the reads that reached the virtio
disk (QEMU's block stats); for Puma also the gets and hits of the
measured random reads (``random_gets_puma``, ``random_hits_puma``) and
the round trip of the network between the two guests, from ping
(``net_rtt_ms``: min, avg, max): no get can be faster.

The Puma case runs only when guest-kmod/ builds a puma.ko and ships
``tools/pumactl``, and the module, loaded in the borrower, offers the
control files the bench drives (under /sys/kernel/puma, through pumactl):
``key`` (shared handshake key), ``port`` and ``role`` (``lender`` /
``borrower``), ``peers`` (``pumactl peer add IP:PORT``; a line with
`` ready`` once connected), ``seq_filter`` and ``stats`` (``name value``
lines, read into the figures of both guests).  Otherwise the case is
listed in ``skipped`` with the reason and its figures are null.
``--puma-set NAME=VALUE`` passes ``pumactl set`` knobs to the borrower
(e.g. the RTT guard, which TCG latencies may trip).

Lender reclaim comparison (Puma case): the lender runs a memory-hungry
program (``memverify -t 0``: populate, fill and check HOG_SHARE of its RAM)
before it lends anything (the second of two runs: the first after boot
is slower) and once while it hosts the borrower's pages.
``lender_alloc_idle_s`` and ``lender_alloc_hosting_s`` are the program's
run times, ``lender_reclaim_x`` = hosting / idle (1.0: hosted
pages cost the lender's own allocations nothing), with the hosted pages
before and after and the lender's shrinker and suspend counters.

Ratios: ``random_x_nopuma`` = Puma / no Puma random IOPS, ``random_x_upper``
= Puma / upper bound, ``seq_x_nopuma`` = Puma (filter on) / no Puma MiB/s,
``upper_x_nopuma`` = upper bound / no Puma (what lending could gain).
"""

import argparse
import json
import os
import shutil
import sys

from puma_lab import errors
from puma_lab import kmod
from puma_lab import lab as lab_mod
from puma_lab import paths
from puma_lab import vm

DATA = '/mnt/data/ws'
CONTROL = '/sys/kernel/puma'
CONTROL_FILES = ('role', 'key', 'port', 'peers', 'seq_filter', 'stats')
PUMACTL = 'sh /mnt/host/pumactl'
KEY = 'bench-puma-shared-key'
PORT = 7400
CASES = ('nopuma', 'upper', 'puma')
# Share of the lender's RAM its memory-hungry program takes.
HOG_SHARE = 0.7
# fio case name, fio arguments (the file and run time are added).  Random
# reads are uniform and independent from one run to the next: by default
# fio repeats the same sequence in every run and reads no block twice in
# one, so a measured run would re-read what its warm-up just cached.
FIO = {
    'random': '--rw=randread --bs=4k --ioengine=psync --time_based '
              '--randrepeat=0 --norandommap',
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


def summarize(meas, skipped):
    """The bench's figures from MEAS[case][kind] (fio figures or absent).

    Anything not measured is None; never a guess.
    """
    def get(case, kind, key):
        return meas.get(case, {}).get(kind, {}).get(key)

    kinds = ('random', 'seq', 'seq_nofilter')
    out = {}
    for case in CASES:
        for kind in kinds:
            for key in ('iops', 'mib_s', 'disk_reads'):
                if kind == 'seq_nofilter' and case != 'puma':
                    continue
                if kind == 'seq' and case == 'upper':
                    continue
                out['%s_%s_%s' % (kind, key, case)] = get(case, kind, key)
    out['random_x_nopuma'] = _ratio(get('puma', 'random', 'iops'),
                                    get('nopuma', 'random', 'iops'))
    out['random_x_upper'] = _ratio(get('puma', 'random', 'iops'),
                                   get('upper', 'random', 'iops'))
    out['seq_x_nopuma'] = _ratio(get('puma', 'seq', 'mib_s'),
                                 get('nopuma', 'seq', 'mib_s'))
    out['upper_x_nopuma'] = _ratio(get('upper', 'random', 'iops'),
                                   get('nopuma', 'random', 'iops'))
    out['p99_ms'] = {'%s_%s' % (kind, case): get(case, kind, 'p99_ms')
                     for case in CASES for kind in kinds
                     if not (kind == 'seq_nofilter' and case != 'puma')
                     and not (kind == 'seq' and case == 'upper')}
    out['p50_ms'] = {'%s_%s' % (kind, case): get(case, kind, 'p50_ms')
                     for case in CASES for kind in ('random',)}
    reclaim = meas.get('puma', {}).get('reclaim', {})
    for key in ('alloc_idle_s', 'alloc_hosting_s', 'hosted_before',
                'hosted_after', 'lend_shrunk', 'lend_suspends'):
        out['lender_' + key] = reclaim.get(key)
    out['lender_reclaim_x'] = _ratio(reclaim.get('alloc_hosting_s'),
                                     reclaim.get('alloc_idle_s'))
    out['random_gets_puma'] = get('puma', 'random', 'gets')
    out['random_hits_puma'] = get('puma', 'random', 'hits')
    out['net_rtt_ms'] = meas.get('puma', {}).get('net_rtt_ms')
    out['puma_stats'] = meas.get('puma', {}).get('stats')
    out['skipped'] = skipped
    return out


def disk_reads(g):
    """Read requests the guest's data disk (d1) has completed."""
    for dev in g.qmp('query-blockstats'):
        if dev.get('device') == 'd1':
            return dev['stats']['rd_operations']
    raise errors.LabError('guest %s has no data disk d1' % g.name)


def fio(g, kind, args, runtime=None):
    """Run one fio case in G from a page cache prepared by the caller."""
    argv = ('fio --name=%s --filename=%s --readonly --invalidate=0 '
            '--output-format=json %s'
            % (kind, DATA, FIO[kind.split('_')[0]]))
    if kind == 'random':
        argv += ' --runtime=%d' % (runtime or args.runtime)
    else:
        argv += ' --size=%dM --runtime=%d' % (args.ws_mb, 4 * args.runtime)
    before = disk_reads(g)
    res = g.run(argv, timeout=20 * (runtime or args.runtime) + 600)
    fig = fio_figures(json.loads(res.out[res.out.index('{'):]))
    fig['disk_reads'] = disk_reads(g) - before
    print('%s %s: %s' % (g.name, kind, fig), file=sys.stderr)
    return fig


def drop_caches(g):
    g.run('sync; echo 3 > /proc/sys/vm/drop_caches')


def warm_up(g, args, passes=None):
    """Sequential passes in large requests: the cache keeps what fits."""
    drop_caches(g)
    g.run('echo 2048 > /sys/block/vdb/queue/read_ahead_kb && '
          'for i in $(seq %d); do cat %s > /dev/null; done; '
          'echo 128 > /sys/block/vdb/queue/read_ahead_kb'
          % (passes or args.warmup_passes, DATA),
          timeout=20 * args.runtime + 600)


def random_warm_up(g, args):
    """Unmeasured random reads, to reach the caches' steady state."""
    if args.random_warmup:
        fio(g, 'random', args, runtime=args.random_warmup)


def measure(g, args, seq_kinds=('seq',)):
    """Random reads after a warm-up, then cold sequential scans."""
    out = {}
    warm_up(g, args)
    random_warm_up(g, args)
    out['random'] = fio(g, 'random', args)
    for kind in seq_kinds:
        drop_caches(g)
        out[kind] = fio(g, kind, args)
    return out


def boot(lab, name, args, mem_mb, disks, share=None, nics=0):
    return vm.Guest(lab, name, kernel=args.kernel, mem_mb=mem_mb, vcpus=2,
                    disks=disks, share=share, nics=nics).start()


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


def net_rtt_ms(g, ip):
    """Ping round trips from G to IP, ms: {'min', 'avg', 'max'}."""
    line = g.run('ping -c 20 -i 0.2 -q %s' % ip).out.strip().splitlines()[-1]
    # rtt min/avg/max/mdev = 1.005/1.753/7.319/1.401 ms
    values = line.split('=')[1].split()[0].split('/')
    return {k: float(v) for k, v in zip(('min', 'avg', 'max'), values)}


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
                lent['lend_drop_capacity'] >= b['puts']):
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


def puma_case(lab, args, borrower, share):
    """Borrower + lender with puma.ko; (figures, None) or (None, reason)."""
    why = load_borrower(borrower, share)
    if why:
        return None, why
    lender = start_lender(lab, args, share)
    # The first run after boot also pays for the guest's first touches
    # of its RAM: time the second one.
    lender_hog(lender, args)
    reclaim = {'alloc_idle_s': lender_hog(lender, args)}
    pair(lender, borrower, args.puma_set)
    out = {'net_rtt_ms': net_rtt_ms(borrower,
                                    lender.addrs[0].split('/')[0])}
    # The warm-up passes are sequential: with the filter on, nothing
    # they evict would reach the lender.
    pumactl(borrower, 'set', 'seq_filter', '0')
    warm_up(borrower, args)
    pumactl(borrower, 'set', 'seq_filter', '1')
    random_warm_up(borrower, args)
    before = puma_stats(borrower)
    out['random'] = fio(borrower, 'random', args)
    after = puma_stats(borrower)
    for key in ('gets', 'hits'):
        out['random'][key] = after[key] - before[key]
    drop_caches(borrower)
    out['seq'] = fio(borrower, 'seq', args)
    # Filter off: a first scan fills the lender, the second is measured.
    pumactl(borrower, 'set', 'seq_filter', '0')
    warm_up(borrower, args, passes=1)
    out['seq_nofilter'] = fio(borrower, 'seq_nofilter', args)
    out['stats'] = {'borrower': puma_stats(borrower),
                    'lender': puma_stats(lender)}
    # The lender now hosts the scan's pages; its own program needs them.
    reclaim['hosted_before'] = out['stats']['lender'].get('hosted_pages')
    reclaim['alloc_hosting_s'] = lender_hog(lender, args)
    after = puma_stats(lender)
    reclaim['hosted_after'] = after.get('hosted_pages')
    for key in ('lend_shrunk', 'lend_suspends'):
        reclaim[key] = (after.get(key, 0) -
                        out['stats']['lender'].get(key, 0))
    out['reclaim'] = reclaim
    return out, None


def make_disk(lab, args):
    files = lab.path('ws')
    os.makedirs(files)
    with open(os.path.join(files, 'ws'), 'wb') as f:
        for _ in range(args.ws_mb):
            f.write(os.urandom(1024 * 1024))
    disk = vm.make_data_disk(lab.path('data.img'), args.ws_mb + 96, files)
    shutil.rmtree(files)
    disk.readonly = True
    disk.iops = args.iops
    return disk


def run(argv):
    ap = argparse.ArgumentParser(prog='lab/bench puma')
    ap.add_argument('--kernel', default='6.12', choices=paths.KERNELS)
    ap.add_argument('--borrower-mb', type=int, default=256)
    ap.add_argument('--lender-mb', type=int, default=768)
    ap.add_argument('--ws-mb', type=int, default=0,
                    help='working set (default: 2 x borrower RAM)')
    ap.add_argument('--iops', type=int, default=200,
                    help='IOPS limit of the data disk')
    ap.add_argument('--runtime', type=int, default=60,
                    help='seconds of random reads per case')
    ap.add_argument('--warmup-passes', type=int, default=3,
                    help='sequential passes over the working set first')
    ap.add_argument('--random-warmup', type=int, default=60,
                    help='seconds of unmeasured random reads before them')
    ap.add_argument('--puma-set', action='append', default=[],
                    metavar='NAME=VALUE',
                    help='pumactl set NAME VALUE on the borrower')
    ap.add_argument('--cases', default=','.join(CASES),
                    help='comma-separated subset of %s' % ', '.join(CASES))
    args = ap.parse_args(argv)
    args.ws_mb = args.ws_mb or 2 * args.borrower_mb
    cases = args.cases.split(',')
    for knob in args.puma_set:
        if '=' not in knob:
            ap.error('--puma-set %r: NAME=VALUE expected' % knob)
    if not set(cases) <= set(CASES):
        ap.error('unknown case in %r (known: %s)'
                 % (args.cases, ', '.join(CASES)))
    if not args.borrower_mb < args.ws_mb < args.borrower_mb + args.lender_mb:
        ap.error('the working set must be larger than the borrower RAM '
                 'and smaller than borrower + lender RAM')
    meas, skipped = {}, {}
    with lab_mod.Lab('bench-puma') as lab:
        share = lab.path('share')
        os.makedirs(share)
        disk = make_disk(lab, args)
        if 'puma' in cases:
            try:
                built = kmod.build(paths.kernel(args.kernel),
                                   lab.path('build'))
                for f in (os.path.join(built, 'puma.ko'),
                          os.path.join(kmod.KMOD_SRC, 'tools', 'pumactl')):
                    if os.path.exists(f):
                        shutil.copy(f, share)
                kmod.ship_crypto(paths.kernel(args.kernel), share)
            except errors.LabError as e:
                skipped['puma'] = 'guest-kmod does not build: %s' % e
        if 'nopuma' in cases or 'puma' in cases:
            b = boot(lab, 'borrower', args, args.borrower_mb, [disk],
                     share=share, nics=1).wait_booted()
            size = mount(b)
            if size != args.ws_mb * 1024 * 1024:
                raise errors.LabError('working set file is %d bytes' % size)
            if 'nopuma' in cases:
                meas['nopuma'] = measure(b, args)
            if 'puma' in cases and 'puma' not in skipped:
                fig, why = puma_case(lab, args, b, share)
                if why:
                    skipped['puma'] = why
                else:
                    meas['puma'] = fig
            b.stop()
        if 'upper' in cases:
            u = boot(lab, 'upper', args, args.borrower_mb + args.lender_mb,
                     [disk]).wait_booted()
            mount(u)
            meas['upper'] = {'random': measure(u, args, ())['random']}
            u.stop()
    for case in CASES:
        if case not in cases:
            skipped.setdefault(case, 'not requested (--cases)')
    for case, why in skipped.items():
        print('case %s skipped: %s' % (case, why), file=sys.stderr)
    fig = {'kernel': args.kernel, 'borrower_mb': args.borrower_mb,
           'lender_mb': args.lender_mb, 'ws_mb': args.ws_mb,
           'iops_limit': args.iops, 'runtime_s': args.runtime,
           'warmup_passes': args.warmup_passes,
           'random_warmup_s': args.random_warmup}
    fig.update(summarize(meas, skipped))
    return fig
