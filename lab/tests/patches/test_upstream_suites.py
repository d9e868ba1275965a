# SPDX-License-Identifier: Apache-2.0
"""Upstream's own tests, run on the patched builds in the cache.

Our libvirt series extends libvirt's data-driven tests (qemuxmlconfdata:
domain XML in, QEMU command line and XML out; qemumigparamsdata), the
monitor tests (x-query-split), the capabilities (x-query-split), the
status XML (qemuxmlactivetest: <splitMemory/>) and virsh (domstats
--split, migrate --split); they must pass on the build the lab runs, as
they would in libvirt's CI.
"""

import os
import re
import subprocess

import pytest

from puma_lab import paths

LIBVIRT_SUITES = ('qemuxmlconftest', 'qemuxmlactivetest', 'virschematest',
                  'qemumigparamstest', 'qemumonitorjsontest',
                  'qemucapabilitiestest', 'virshtest')


@pytest.mark.parametrize('suite', LIBVIRT_SUITES)
def test_libvirt_suite(suite):
    build = os.path.join(os.path.dirname(paths.libvirt_prefix()), 'src',
                         'build')
    p = subprocess.run(['meson', 'test', '-C', build, '--no-rebuild',
                        '--print-errorlogs', suite],
                       capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert re.search(r'^\s*1/1 libvirt:bin / %s +OK' % suite, p.stdout,
                     re.M), p.stdout
