# SPDX-License-Identifier: Apache-2.0
"""Guest boot time for each lab kernel, under TCG and under nested KVM.

Boot time = QEMU start to the guest being ready (kernel, initramfs,
overlay root, our init): under TCG, the guest agent answering; with
``--host kvm``, the ready line on the console of an L2 guest under KVM in
a kernel host (``puma_lab.kernel_host``), next to the TCG boot of the same
kernel in the same run.  Each kernel boots RUNS times alternately in one
lab; the figures are medians and maxima, with 6.12 compared to 6.1.
"""

import argparse
import statistics
import sys
import time

from puma_lab import kernel_host
from puma_lab import lab as lab_mod
from puma_lab import paths
from puma_lab import vm


def run(argv):
    ap = argparse.ArgumentParser(prog='lab/bench boot')
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--mem', type=int, default=512)
    ap.add_argument('--vcpus', type=int, default=1)
    ap.add_argument('--host', choices=('tcg', 'kvm'), default='tcg',
                    help='kvm: also boot each kernel as an L2 guest under '
                         'KVM in a kernel host')
    args = ap.parse_args(argv)
    times = {k: [] for k in paths.KERNELS}
    l2 = {k: [] for k in paths.KERNELS}
    with lab_mod.Lab('bench-boot') as lab:
        kh = None
        if args.host == 'kvm':
            t0 = time.monotonic()
            kh = kernel_host.KernelHost(lab, 'kh').start().wait_booted()
            kh.load_kvm()
            kh_boot = time.monotonic() - t0
            print('kernel host ready with kvm_amd: %.2f s' % kh_boot,
                  file=sys.stderr)
        for i in range(args.runs):
            for k in paths.KERNELS:
                g = vm.Guest(lab, 'b%s-%d' % (k.replace('.', ''), i),
                             kernel=k, mem_mb=args.mem, vcpus=args.vcpus)
                t0 = time.monotonic()
                g.start().wait_booted()
                times[k].append(time.monotonic() - t0)
                g.stop()
                print('boot %s run %d: %.2f s' % (k, i, times[k][-1]),
                      file=sys.stderr)
                if kh is None:
                    continue
                n = kernel_host.NestedGuest(
                    kh, 'l2-%s-%d' % (k.replace('.', ''), i), kernel=k,
                    mem_mb=args.mem, vcpus=args.vcpus)
                try:
                    n.start().wait_booted()
                finally:
                    n.stop()
                l2[k].append(n.boot_s)
                print('boot %s under kvm run %d: %.2f s' % (k, i, n.boot_s),
                      file=sys.stderr)
    fig = {'runs': args.runs, 'mem_mb': args.mem, 'vcpus': args.vcpus,
           'host': args.host}
    for k in paths.KERNELS:
        fig['boot_s_%s' % k] = round(statistics.median(times[k]), 2)
        fig['boot_s_%s_max' % k] = round(max(times[k]), 2)
    fig['ratio_6.12_over_6.1'] = round(fig['boot_s_6.12'] / fig['boot_s_6.1'],
                                       2)
    if kh is not None:
        fig['kernel_host_ready_s'] = round(kh_boot, 2)
        for k in paths.KERNELS:
            fig['boot_s_kvm_%s' % k] = round(statistics.median(l2[k]), 2)
            fig['boot_s_kvm_%s_max' % k] = round(max(l2[k]), 2)
            fig['kvm_over_tcg_%s' % k] = round(
                fig['boot_s_kvm_%s' % k] / fig['boot_s_%s' % k], 2)
    return fig
