# SPDX-License-Identifier: Apache-2.0
"""Page merging (KSM) of today's Debian 6.12 on a kernel host: the baseline.

One kernel host (stock 6.12 under TCG with Debian's kvm_amd) runs GUESTS
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
  advisor sets ``pages_to_scan`` itself).

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
"""

import argparse
import os
import sys
import time

from puma_lab import errors
from puma_lab import kernel_host
from puma_lab import ksm_stats
from puma_lab import lab as lab_mod
from puma_lab import paths
from puma_lab import svgplot

SETTINGS = {
    'plain': {'smart_scan': 0, 'advisor_mode': 'none'},
    'stock': {'smart_scan': 1, 'advisor_mode': 'none'},
    'advisor': {'smart_scan': 1, 'advisor_mode': 'scan-time'},
}
# What each guest reads and writes: the same in every guest.
WORKLOAD = ('cat /usr/lib/x86_64-linux-gnu/*.so* /usr/bin/* '
            '>/dev/null 2>&1; seq 1 %d > /dev/shm/puma-ksm; sync')
SAMPLE_EVERY = 10


def _ksm_set(kh, settings):
    """Write SETTINGS to the kernel host's KSM (absent knobs skipped)."""
    script = ['cd /sys/kernel/mm/ksm']
    for name, value in settings.items():
        script.append('if [ -w %s ]; then echo %s > %s; fi'
                      % (name, value, name))
    kh.sh('; '.join(script))


def _sample(kh, t0):
    out = kh.sh(ksm_stats.SAMPLE_SCRIPT).out
    return ksm_stats.parse_sample(out, time.monotonic() - t0)


def _unmerge(kh, timeout=600):
    """run=2: KSM gives every merged page back; wait until it did."""
    kh.sh('echo 2 > /sys/kernel/mm/ksm/run', timeout=timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = _sample(kh, 0)
        if not s.get('pages_shared') and not s.get('pages_sharing'):
            return
        time.sleep(2)
    raise errors.LabError('KSM did not unmerge within %ds' % timeout)


def measure(kh, name, settings, pages_to_scan, max_s):
    _unmerge(kh)
    knobs = dict(settings)
    if settings.get('advisor_mode') != 'scan-time':
        knobs['pages_to_scan'] = pages_to_scan
    _ksm_set(kh, knobs)
    t0 = time.monotonic()
    samples = [_sample(kh, t0)]
    _ksm_set(kh, {'run': 1})
    while True:
        time.sleep(SAMPLE_EVERY)
        samples.append(_sample(kh, t0))
        s = samples[-1]
        print('ksm %s: %5.0f s sharing %d shared %d scans %d ksmd %.1f s'
              % (name, s['t'], s['pages_sharing'], s.get('pages_shared', 0),
                 s.get('full_scans', 0), s['ksmd_cpu_s']), file=sys.stderr)
        if ksm_stats.settled(samples) or s['t'] >= max_s:
            break
    _ksm_set(kh, {'run': 0})
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
    ap.add_argument('--kernel', default='6.12', choices=paths.KERNELS)
    ap.add_argument('--seq', type=int, default=2000000,
                    help='lines of the tmpfs text file each guest writes')
    ap.add_argument('--pages-to-scan', type=int, default=1000)
    ap.add_argument('--max-s', type=int, default=300,
                    help='longest a setting may merge')
    ap.add_argument('--settings', default=','.join(SETTINGS))
    ap.add_argument('--retries', type=int, default=2,
                    help='runs started again after a machine fault')
    ap.add_argument('--plot', default=None,
                    help='write an SVG of pages sharing over time here')
    args = ap.parse_args(argv)
    names = [n for n in args.settings.split(',') if n]
    for n in names:
        if n not in SETTINGS:
            ap.error('unknown setting %r (known: %s)'
                     % (n, ', '.join(SETTINGS)))
    faults = []
    for attempt in range(1 + args.retries):
        try:
            results = _run_once(args, names)
            break
        except kernel_host.MachineFault as e:
            # Nested SVM under TCG loses a machine now and then
            # (docs/lab.md, "Kernel hosts"): start again from nothing.
            faults.append(str(e).splitlines()[0][:300])
            print('machine fault %d: %s' % (len(faults), faults[-1]),
                  file=sys.stderr)
    else:
        raise kernel_host.MachineFault('%d machine faults: %s'
                                       % (len(faults), '; '.join(faults)))
    fig = _figures(args, results)
    fig['machine_faults'] = faults
    return fig


def _run_once(args, names):
    results = {}
    with lab_mod.Lab('bench-ksm') as lab:
        kh = kernel_host.KernelHost(
            lab, 'kh', mem_mb=max(1536, 512 + args.guests * args.mem))
        kh.start().wait_booted()
        kh.load_kvm()
        _ksm_set(kh, {'run': 0})
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


def _figures(args, results):
    fig = {'guests': args.guests, 'mem_mb': args.mem,
           'kernel': args.kernel, 'pages_to_scan': args.pages_to_scan}
    for n, r in results.items():
        for key in ('pages_sharing', 'pages_shared', 't90_s', 'ksmd_cpu_s',
                    'cpu_ms_per_page', 'full_scans', 'duration_s',
                    'settled', 'pages_to_scan_end', 'sharing_at_cpu'):
            fig['%s_%s' % (n, key)] = r[key]
    base = results.get('plain')
    for n, r in results.items():
        if n == 'plain' or not base or not base['pages_sharing']:
            continue
        fig['%s_sharing_x_plain' % n] = round(
            r['pages_sharing'] / base['pages_sharing'], 2)
        if r['cpu_ms_per_page'] and base['cpu_ms_per_page']:
            fig['%s_cpu_per_page_x_plain' % n] = round(
                r['cpu_ms_per_page'] / base['cpu_ms_per_page'], 2)
    if args.plot:
        os.makedirs(os.path.dirname(os.path.abspath(args.plot)),
                    exist_ok=True)
        plot(results, args.plot)
    return fig
