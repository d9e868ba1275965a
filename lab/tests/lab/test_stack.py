# SPDX-License-Identifier: Apache-2.0
"""The patched QEMU and libvirt are the ones running, with our series."""

import os
import re
import subprocess

from puma_lab import host as host_mod
from puma_lab import migration
from puma_lab import paths
from puma_lab import vm


def current_series_id(series_dir):
    lib = os.path.join(paths.TOP, 'lab', 'lib', 'common.sh')
    out = subprocess.run(['bash', '-c', '. %s; series_id %s' % (lib,
                                                                series_dir)],
                         capture_output=True, text=True, check=True)
    return 'puma-' + out.stdout.strip()


def test_running_qemu_is_the_patched_build(lab):
    want = current_series_id(os.path.join(paths.TOP, 'qemu-patches'))
    assert paths.series_id('qemu') == want
    out = subprocess.run([paths.qemu_binary(), '--version'],
                         capture_output=True, text=True, check=True).stdout
    assert '10.0.' in out and '(%s)' % want in out
    g = vm.Guest(lab, 'ver').start().wait_booted()
    assert g.qmp('query-version')['package'].strip() == want


def test_running_libvirtd_is_the_patched_build(lab):
    want = current_series_id(os.path.join(paths.TOP, 'libvirt-patches'))
    qemu_want = current_series_id(os.path.join(paths.TOP, 'qemu-patches'))
    assert paths.series_id('libvirt') == want
    h = host_mod.Host(lab, 'v').start()
    assert 'Running against daemon: 11.3.0' in h.virsh('version', '--daemon')
    # libvirtd heads each domain log with its own and QEMU's versions.
    migration.start_guest(h, 'ident', mem_mb=256, vcpus=1)
    with open(os.path.join(h.dir, 'log', 'qemu', 'ident.log')) as f:
        header = f.read(4096)
    assert 'libvirt version: 11.3.0, package: %s (puma)' % want in header
    assert re.search(r'qemu version: 10\.0\.\d+\(?%s\b' % qemu_want, header)
