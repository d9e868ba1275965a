# SPDX-License-Identifier: Apache-2.0
"""guest-kmod builds against both Debian guest kernels; DKMS metadata."""

import os
import re
import subprocess

import pytest

from puma_lab import kmod
from puma_lab import paths


@pytest.mark.parametrize('kernel', paths.KERNELS)
def test_module_builds_for_kernel(kernel, tmp_path):
    k = paths.kernel(kernel)
    built = kmod.build(k, str(tmp_path))
    for mod in ('puma.ko', 'shoot4u.ko'):
        info = subprocess.run(['modinfo', os.path.join(built, mod)],
                              capture_output=True, text=True,
                              check=True).stdout
        vermagic = re.search(r'^vermagic:\s+(\S+)', info, re.M).group(1)
        assert vermagic == k.release
        assert re.search(r'^license:\s+GPL$', info, re.M)


def test_dkms_conf_matches_kbuild():
    src = kmod.KMOD_SRC
    with open(os.path.join(src, 'dkms.conf')) as f:
        conf = dict(re.findall(r'^([A-Z_\[\]0-9]+)="([^"]*)"$', f.read(),
                               re.M))
    with open(os.path.join(src, 'Kbuild')) as f:
        objs = re.findall(r'^obj-m\s*\+?=\s*(.+)$', f.read(), re.M)
    modules = sorted(o[:-2] for line in objs for o in line.split())
    built = sorted(v for k, v in conf.items()
                   if k.startswith('BUILT_MODULE_NAME['))
    assert built == modules
    assert conf['PACKAGE_NAME'] == 'puma'
    assert '${kernel_source_dir}' in conf['MAKE[0]']
