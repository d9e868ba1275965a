# SPDX-License-Identifier: Apache-2.0
"""Guest boot time under TCG for each lab kernel.

Boot time = QEMU start to the guest agent answering (kernel, initramfs,
overlay root, our init).  Each kernel boots RUNS times alternately in one
lab; the figures are medians, with 6.12 compared to 6.1 in the same run.
"""

import argparse
import statistics
import sys
import time

from puma_lab import lab as lab_mod
from puma_lab import paths
from puma_lab import vm


def run(argv):
    ap = argparse.ArgumentParser(prog='lab/bench boot')
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--mem', type=int, default=512)
    ap.add_argument('--vcpus', type=int, default=1)
    args = ap.parse_args(argv)
    times = {k: [] for k in paths.KERNELS}
    with lab_mod.Lab('bench-boot') as lab:
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
    fig = {'runs': args.runs, 'mem_mb': args.mem, 'vcpus': args.vcpus}
    for k in paths.KERNELS:
        fig['boot_s_%s' % k] = round(statistics.median(times[k]), 2)
        fig['boot_s_%s_max' % k] = round(max(times[k]), 2)
    fig['ratio_6.12_over_6.1'] = round(fig['boot_s_6.12'] / fig['boot_s_6.1'],
                                       2)
    return fig
