# SPDX-License-Identifier: Apache-2.0
"""The patched QEMU and libvirt are the ones running, with our series."""

import os
import re
import subprocess

from puma_lab import host as host_mod
from puma_lab import migration
from puma_lab import paths
from puma_lab import vm


def test_running_qemu_is_the_patched_build(lab):
    want = paths.checkout_series_id('qemu-patches')
    assert paths.series_id('qemu') == want
    out = subprocess.run([paths.qemu_binary(), '--version'],
                         capture_output=True, text=True, check=True).stdout
    assert '10.0.' in out and '(%s)' % want in out
    g = vm.Guest(lab, 'ver').start().wait_booted()
    assert g.qmp('query-version')['package'].strip() == want


def test_running_libvirtd_is_the_patched_build(lab):
    want = paths.checkout_series_id('libvirt-patches')
    qemu_want = paths.checkout_series_id('qemu-patches')
    assert paths.series_id('libvirt') == want
    h = host_mod.Host(lab, 'v').start()
    assert 'Running against daemon: 11.3.0' in h.virsh('version', '--daemon')
    # libvirtd heads each domain log with its own and QEMU's versions.
    migration.start_guest(h, 'ident', mem_mb=256, vcpus=1)
    with open(os.path.join(h.dir, 'log', 'qemu', 'ident.log')) as f:
        header = f.read(4096)
    assert 'libvirt version: 11.3.0, package: %s (puma)' % want in header
    assert re.search(r'qemu version: 10\.0\.\d+\(?%s\b' % qemu_want, header)
