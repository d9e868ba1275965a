# SPDX-License-Identifier: Apache-2.0
"""puma.ko loads only on kernels whose read path it was reviewed against.

get.c replaces read_pages() and filemap_read_folio() with copies of their
bodies; readpath.c recognises a reviewed kernel by the two functions'
sizes.  On each guest kernel: the built-in list accepts it; a list that
does not hold it (the readpath_reviewed parameter, which replaces the
built-in one) makes the load fail with a message naming the running
sizes; those sizes given back load it; a malformed parameter is refused.
"""

import re

import pytest

from puma_lab import paths
from puma_lab import vm

import test_puma

KO = '/mnt/host/puma.ko'


def loaded(g):
    return g.run('grep -q "^puma " /proc/modules', check=False).rc == 0


@pytest.mark.parametrize('kernel', paths.KERNELS)
def test_unreviewed_kernel_refused(lab, kernel):
    share = test_puma.share_with_module(lab, kernel)
    g = vm.Guest(lab, 'rp', kernel=kernel, mem_mb=256, vcpus=1, nics=1,
                 share=share).start()
    g.wait_booted()

    res = g.run('insmod %s readpath_reviewed=read_pages=0x10,'
                'filemap_read_folio=0x10' % KO, check=False)
    assert res.rc != 0 and 'Operation not permitted' in res.err, res
    assert not loaded(g)
    msg = g.run('dmesg | grep "refusing to load" | tail -1').out
    m = re.search(r'read_pages \(size (0x[0-9a-f]+)\) and '
                  r'filemap_read_folio \(size (0x[0-9a-f]+)\)', msg)
    assert m, msg
    assert g.run('uname -r').out.strip() in msg, msg

    # Malformed (a size missing): EINVAL, which insmod words so.
    res = g.run('insmod %s readpath_reviewed=read_pages=%s' % (KO, m[1]),
                check=False)
    assert res.rc != 0 and 'Invalid parameters' in res.err, res
    assert not loaded(g)
    assert 'expected read_pages=SIZE,filemap_read_folio=SIZE' in g.run(
        'dmesg | tail -3').out

    # The sizes the refusal named, given as reviewed, load it.
    spec = 'read_pages=%s,filemap_read_folio=%s' % (m[1], m[2])
    g.run('insmod %s readpath_reviewed=%s' % (KO, spec))
    assert g.run('cat /sys/kernel/puma/readpath').out.strip() == spec
    g.run('rmmod puma')

    # The built-in list holds this kernel.
    g.run('insmod %s' % KO)
    assert g.run('cat /sys/kernel/puma/readpath').out.strip() == spec
    g.run('rmmod puma')
    test_puma.check_dmesg(g)
