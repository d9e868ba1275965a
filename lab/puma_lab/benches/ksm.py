# SPDX-License-Identifier: Apache-2.0
"""Page merging (KSM) on a kernel host: today's KSM against the look-ahead.

One kernel host (under TCG; ``--host-kernel``: Debian's stock 6.12 with
its kvm_amd, or the khost kernel, the same source with our KSM series
from ksm-patches/ and KVM built in) runs GUESTS
L2 guests under KVM, all of the same lab image and kernel; their QEMUs
mark guest RAM mergeable (``mem-merge``, QEMU's default), as on a
hypervisor with KSM.  Once they booted, each guest runs the same
workload: it reads the same files of its root image into its page cache
(runs of identical file-backed pages, the sharing the look-ahead of the
KSM study targets) and writes the same text to a tmpfs file.  Then, with
the guests' memory left as it is, each KSM setting in turn starts from
nothing (``run=2`` unmerges everything) and merges until it settled (two
full scans and pages_sharing grew less than 1 % over three samples) or
``--max-s`` passed:

- ``plain``: ``smart_scan=0``, no advisor;
- ``stock``: Debian's defaults (``smart_scan=1``, no advisor);
- ``advisor``: ``smart_scan=1`` and ``advisor_mode=scan-time`` (the
  advisor sets ``pages_to_scan`` itself);
- ``lookahead`` (khost kernel only): ``stock`` with ``lookahead=1``.

On the khost kernel the first three run with ``lookahead=0``: today's
KSM, in the same kernel and the same run.  ``lookahead_sharing_x`` is
the look-ahead's pages sharing against the best of the three at equal
ksmd CPU (the fewest CPU seconds any of them used, ``equal_cpu_s``),
``lookahead_cpu_per_page_x`` its CPU per page sharing at the end against
the best of the three; ``lookahead_hits``/``lookahead_misses`` are the
series' own counters over the setting's run.

``plain`` and ``stock`` scan ``--pages-to-scan`` pages per wake-up (the
kernel's default, 100, takes several minutes per full scan under TCG).
Figures per setting (``<setting>_*``): pages sharing at the end, seconds
until 90 % of them, ksmd's CPU seconds, CPU milliseconds per page
sharing; and ``<setting>_sharing_at_cpu``, pages sharing against ksmd's
CPU seconds, the curve on which the look-ahead series will be compared
at equal CPU.  Ratios against ``plain`` measured in the same run:
``stock_sharing_x_plain``, ``advisor_sharing_x_plain`` and
``*_cpu_per_page_x_plain``.  Times are the kernel host's under TCG:
compare settings within a run, not with a hypervisor.

That is the static phase (``--phase static``, the default).  The dynamic
phase (``--phase dynamic`` or ``both``, benches/ksm_dynamic.py) runs
each setting while fresh guests boot, idle and work (a package install
of the same files), sampled every few seconds; its figures are
``dyn_<setting>_*``, ``dyn_lookahead_sharing_x`` and
``dyn_lookahead_cpu_per_page_x`` (the same comparison as above, over
the whole timeline).

Then the caching half (``--cache-modes``, host_cache_workload.py): the
same number of guests with data disks in the kernel host's page cache,
once per mode: ``writeback`` (double caching), ``none`` (O_DIRECT) and
``exclusive`` (QEMU's exclusive-cache).  The kernel host's data disk is
throttled (``--cache-disk-bps``, ``--cache-disk-iops``: the modelled
disk; the file itself sits in this machine's page cache).  Figures
``cache_<mode>_*`` and ``host_cache_x_writeback`` (the kernel host's page
cache of the images, exclusive / writeback), ``throughput_x_writeback``
and ``throughput_x_none`` (the guests' read throughput, exclusive /
the other), ``reread_x_writeback`` (a read after the guests dropped
their own caches: what exclusive caching gives up).
"""

import argparse
import os
import subprocess
import sys
import time

from puma_lab.benches import ksm_dynamic
from puma_lab import errors
from puma_lab import host_cache
from puma_lab import host_cache_workload
from puma_lab import kernel_host
from puma_lab import ksm_knobs
from puma_lab import ksm_stats
from puma_lab import lab as lab_mod
from puma_lab import paths
from puma_lab import svgplot

SETTINGS = {
    'plain': {'smart_scan': 0, 'advisor_mode': 'none', 'lookahead': 0},
    'stock': {'smart_scan': 1, 'advisor_mode': 'none', 'lookahead': 0},
    'advisor': {'smart_scan': 1, 'advisor_mode': 'scan-time',
                'lookahead': 0},
    # Our KSM series (--host-kernel khost): Debian's defaults plus the
    # look-ahead.
    'lookahead': {'smart_scan': 1, 'advisor_mode': 'none', 'lookahead': 1},
}
# The settings of today's KSM, which the look-ahead is measured against.
STOCK_SETTINGS = ('plain', 'stock', 'advisor')
# What each guest reads and writes: the same in every guest.
WORKLOAD = ('cat /usr/lib/x86_64-linux-gnu/*.so* /usr/bin/* '
            '>/dev/null 2>&1; seq 1 %d > /dev/shm/puma-ksm; sync')
SAMPLE_EVERY = 10


def measure(kh, name, settings, pages_to_scan, max_s):
    ksm_knobs.unmerge(kh)
    ksm_knobs.set_knobs(kh, ksm_knobs.setting_knobs(settings, pages_to_scan))
    t0 = time.monotonic()
    samples = [ksm_knobs.sample(kh, t0)]
    ksm_knobs.set_knobs(kh, {'run': 1})
    while True:
        time.sleep(SAMPLE_EVERY)
        samples.append(ksm_knobs.sample(kh, t0))
        s = samples[-1]
        print('ksm %s: %5.0f s sharing %d shared %d scans %d ksmd %.1f s'
              % (name, s['t'], s['pages_sharing'], s.get('pages_shared', 0),
                 s.get('full_scans', 0), s['ksmd_cpu_s']), file=sys.stderr)
        if ksm_stats.settled(samples) or s['t'] >= max_s:
            break
    ksm_knobs.set_knobs(kh, {'run': 0})
    fig = ksm_stats.summary(samples)
    fig['settled'] = ksm_stats.settled(samples)
    fig['samples'] = [(round(x['t']), x['pages_sharing']) for x in samples]
    return fig


def plot(results, path):
    step = SAMPLE_EVERY
    series = {}
    for name, fig in results.items():
        series[name] = [sharing for _t, sharing in fig['samples']]
    with open(path, 'w') as f:
        f.write(svgplot.lines(series, step, 'KSM on a kernel host: pages '
                              'sharing over time', 'seconds', 'pages'))


def run(argv):
    ap = argparse.ArgumentParser(prog='lab/bench ksm')
    ap.add_argument('--guests', type=int, default=2)
    ap.add_argument('--mem', type=int, default=256,
                    help='MiB of each L2 guest')
    ap.add_argument('--kernel', default='6.12', choices=paths.KERNELS,
                    help="the L2 guests' kernel")
    ap.add_argument('--host-kernel', default=None,
                    choices=kernel_host.HOST_KERNELS,
                    help="the kernel host's kernel: Debian's stock 6.12, "
                         'or khost, the build with our KSM series (built '
                         'by lab/setup khost on the way); default: khost '
                         'when the lookahead setting runs, else 6.12')
    ap.add_argument('--seq', type=int, default=2000000,
                    help='lines of the tmpfs text file each guest writes')
    ap.add_argument('--pages-to-scan', type=int, default=1000)
    ap.add_argument('--max-s', type=int, default=300,
                    help='longest a setting may merge')
    ap.add_argument('--settings', default=','.join(SETTINGS))
    ap.add_argument('--phase', default='static',
                    choices=('static', 'dynamic', 'both'),
                    help='the merging half: static (the guests booted and '
                         'worked before each setting merges), dynamic (KSM '
                         'runs while fresh guests boot, idle and work; '
                         'ksm_dynamic.py) or both')
    ap.add_argument('--idle-s', type=int, default=60,
                    help='dynamic phase: seconds the guests stay idle '
                         'after boot')
    ap.add_argument('--after-s', type=int, default=60,
                    help='dynamic phase: seconds sampled after the '
                         'workload')
    ap.add_argument('--work-timeout', type=int, default=1800,
                    help="dynamic phase: longest the guests' workload may "
                         'take')
    ap.add_argument('--dyn-plot', default=None,
                    help='write an SVG of the dynamic phase here')
    ap.add_argument('--retries', type=int, default=2,
                    help='runs started again after a machine fault')
    ap.add_argument('--plot', default=None,
                    help='write an SVG of pages sharing over time here')
    ap.add_argument('--cache-modes', default=','.join(host_cache.MODES),
                    help='cache modes of the caching half, in order (empty: '
                         'none)')
    ap.add_argument('--cache-files', type=int, default=3,
                    help="files each guest reads in the caching half")
    ap.add_argument('--cache-file-mb', type=int, default=32)
    ap.add_argument('--cache-rounds', type=int, default=3,
                    help='times each guest reads its files')
    ap.add_argument('--cache-disk-bps', type=int, default=200 << 20,
                    help="the modelled disk under the kernel host's page "
                         'cache: bytes/s (0: unthrottled)')
    ap.add_argument('--cache-disk-iops', type=int, default=4000)
    args = ap.parse_args(argv)
    names = [n for n in args.settings.split(',') if n]
    args.modes = [m for m in args.cache_modes.split(',') if m]
    for m in args.modes:
        if m not in host_cache.MODES:
            ap.error('unknown cache mode %r (known: %s)'
                     % (m, ', '.join(host_cache.MODES)))
    if not names and not args.modes:
        ap.error('nothing to measure: no setting and no cache mode')
    for n in names:
        if n not in SETTINGS:
            ap.error('unknown setting %r (known: %s)'
                     % (n, ', '.join(SETTINGS)))
    if args.host_kernel is None:
        args.host_kernel = 'khost' if 'lookahead' in names else '6.12'
    if 'lookahead' in names and args.host_kernel != 'khost':
        ap.error('the lookahead setting needs --host-kernel khost')
    if args.host_kernel == 'khost':
        setup = os.path.join(paths.TOP, 'lab', 'setup')
        if subprocess.run([setup, 'khost']).returncode:
            raise errors.LabError('lab/setup khost failed')
    faults = []
    # What completed is kept across machine faults: a new try measures
    # only what is left.
    results, dynamic, caching = {}, {}, {}
    for attempt in range(1 + args.retries):
        try:
            _run_once(args, names, results, dynamic, caching)
            break
        except kernel_host.MachineFault as e:
            # Nested SVM under TCG loses a machine now and then
            # (docs/lab.md, "Kernel hosts"): start again on a new one,
            # from the half (the mode) the fault interrupted.
            faults.append(str(e).splitlines()[0][:300])
            print('machine fault %d: %s' % (len(faults), faults[-1]),
                  file=sys.stderr)
    else:
        raise kernel_host.MachineFault('%d machine faults: %s'
                                       % (len(faults), '; '.join(faults)))
    fig = _figures(args, results, caching)
    if dynamic:
        _dynamic_figures(args, fig, dynamic)
    fig['machine_faults'] = faults
    return fig


def _run_once(args, names, results, dynamic, caching):
    """What RESULTS, DYNAMIC and CACHING lack, measured into them."""
    with lab_mod.Lab('bench-ksm') as lab:
        disks = []
        if args.modes:
            disks.append(host_cache.kernel_host_disk(
                lab, 'kh', 1024 + args.guests * 2 * args.cache_files *
                args.cache_file_mb, bps=args.cache_disk_bps,
                iops=args.cache_disk_iops))
        kh = kernel_host.KernelHost(
            lab, 'kh', mem_mb=max(1536, 512 + args.guests * args.mem),
            kernel=args.host_kernel, disks=disks)
        kh.start().wait_booted()
        kh.load_kvm()
        if names and args.phase in ('static', 'both') and not results:
            results.update(_merging(args, names, kh))
        if names and args.phase in ('dynamic', 'both'):
            for n in names:
                if n in dynamic:
                    continue
                dynamic[n] = ksm_dynamic.measure(
                    kh, n, ksm_knobs.setting_knobs(SETTINGS[n],
                                                   args.pages_to_scan),
                    args.guests, args.kernel, args.mem, args.idle_s,
                    args.after_s, args.work_timeout,
                    lambda line: print(line, file=sys.stderr))
        if args.modes:
            host_cache.mount_data(kh)
            for m in args.modes:
                if m in caching:
                    continue
                caching[m] = host_cache_workload.measure(
                    kh, m, args.guests, args.kernel, args.mem,
                    args.cache_files, args.cache_file_mb, args.cache_rounds,
                    lambda line: print(line, file=sys.stderr))


def _merging(args, names, kh):
    """The merging half: every setting of NAMES on the same guests."""
    results = {}
    ksm_knobs.set_knobs(kh, {'run': 0})
    knobs = kh.sh('cd /sys/kernel/mm/ksm && grep -H . *').out
    print('kernel host KSM before:\n' + knobs, file=sys.stderr)
    guests = []
    for i in range(args.guests):
        g = kernel_host.NestedGuest(kh, 'ksm%d' % i, kernel=args.kernel,
                                    mem_mb=args.mem)
        g.start().wait_booted()
        guests.append(g)
        print('guest %s booted in %.1f s' % (g.name, g.boot_s),
              file=sys.stderr)
    for g in guests:
        g.run(WORKLOAD % args.seq, timeout=900)
    for n in names:
        results[n] = measure(kh, n, SETTINGS[n], args.pages_to_scan,
                             args.max_s)
    for g in guests:
        g.stop()
    return results


def _figures(args, results, caching):
    fig = {'guests': args.guests, 'mem_mb': args.mem,
           'kernel': args.kernel, 'host_kernel': args.host_kernel,
           'pages_to_scan': args.pages_to_scan}
    for n, r in results.items():
        for key in ('pages_sharing', 'pages_shared', 't90_s', 'ksmd_cpu_s',
                    'cpu_ms_per_page', 'full_scans', 'duration_s',
                    'settled', 'pages_to_scan_end', 'sharing_at_cpu'):
            fig['%s_%s' % (n, key)] = r[key]
    lookahead_figures(fig, results)
    if caching:
        fig.update({'cache_files': args.cache_files,
                    'cache_file_mb': args.cache_file_mb,
                    'cache_rounds': args.cache_rounds,
                    'cache_disk_bps': args.cache_disk_bps,
                    'cache_disk_iops': args.cache_disk_iops})
        fig.update(host_cache_workload.figures(caching))
    base = results.get('plain')
    for n, r in results.items():
        if n == 'plain' or not base or not base['pages_sharing']:
            continue
        fig['%s_sharing_x_plain' % n] = round(
            r['pages_sharing'] / base['pages_sharing'], 2)
        if r['cpu_ms_per_page'] and base['cpu_ms_per_page']:
            fig['%s_cpu_per_page_x_plain' % n] = round(
                r['cpu_ms_per_page'] / base['cpu_ms_per_page'], 2)
    if args.plot and results:
        os.makedirs(os.path.dirname(os.path.abspath(args.plot)),
                    exist_ok=True)
        plot(results, args.plot)
    return fig


def _dynamic_figures(args, fig, dynamic):
    """The dynamic phase's figures (dyn_*) and its plot."""
    fig.update({'dyn_idle_s': args.idle_s, 'dyn_after_s': args.after_s,
                'dyn_sample_s': ksm_dynamic.SAMPLE_EVERY})
    ksm_dynamic.figures(fig, dynamic)
    lookahead_figures(fig, dynamic, prefix='dyn_')
    if args.dyn_plot:
        os.makedirs(os.path.dirname(os.path.abspath(args.dyn_plot)),
                    exist_ok=True)
        series, marks = ksm_dynamic.plot_series(dynamic)
        with open(args.dyn_plot, 'w') as f:
            f.write(svgplot.lines(
                series, ksm_dynamic.SAMPLE_EVERY, 'KSM while %d guests '
                'boot, idle and work: pages sharing' % args.guests,
                'seconds since KSM started', 'pages', marks))


def lookahead_figures(fig, results, prefix=''):
    """The look-ahead against the best of today's settings of this run.

    RESULTS are one phase's ksm_stats.summary() per setting; the keys get
    PREFIX (``dyn_`` for the dynamic phase).
    """
    look = results.get('lookahead')
    stock = {n: results[n] for n in STOCK_SETTINGS if n in results}
    if not look or not stock:
        return
    fig[prefix + 'lookahead_hits'] = look['lookahead_hits']
    fig[prefix + 'lookahead_misses'] = look['lookahead_misses']
    equal = ksm_stats.at_equal_cpu(look['sharing_at_cpu'],
                                   [r['sharing_at_cpu']
                                    for r in stock.values()])
    if equal:
        cpu_s, mine, best = equal
        fig[prefix + 'equal_cpu_s'] = cpu_s
        fig[prefix + 'lookahead_sharing_at_equal_cpu'] = mine
        fig[prefix + 'best_stock_sharing_at_equal_cpu'] = best
        if best:
            fig[prefix + 'lookahead_sharing_x'] = round(mine / best, 2)
    per_page = [r['cpu_ms_per_page'] for r in stock.values()
                if r['cpu_ms_per_page']]
    if look['cpu_ms_per_page'] and per_page:
        fig[prefix + 'lookahead_cpu_per_page_x'] = round(
            look['cpu_ms_per_page'] / min(per_page), 2)
