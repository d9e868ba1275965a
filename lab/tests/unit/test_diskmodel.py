# SPDX-License-Identifier: Apache-2.0
"""The disk model: dilation, per-class delays, nbdkit and QEMU options."""

import pytest

from puma_lab import diskmodel
from puma_lab import errors
from puma_lab import vm


def test_dilation_and_delays():
    factor = diskmodel.dilation(1900.0, 50.0)
    assert factor == 38.0
    assert diskmodel.modelled_ms('netvol', factor) == 38.0
    assert diskmodel.modelled_ms('hdd', factor) == 304.0


def test_bad_inputs_are_refused():
    with pytest.raises(errors.LabError):
        diskmodel.dilation(0, 50.0)
    with pytest.raises(errors.LabError, match='unknown device class'):
        diskmodel.modelled_ms('tape', 2.0)


def test_nbdkit_argv_with_and_without_delay():
    argv = diskmodel.nbdkit_argv('/i.img', '/s', '/p', 37.6)
    assert argv[:2] == ['nbdkit', '--foreground']
    assert '--readonly' in argv
    assert argv[argv.index('--unix') + 1] == '/s'
    assert '--filter=delay' in argv
    assert argv[-3:] == ['file', 'file=/i.img', 'rdelay=38ms']
    plain = diskmodel.nbdkit_argv('/i.img', '/s', '/p', 0)
    assert '--filter=delay' not in plain
    assert plain[-2:] == ['file', 'file=/i.img']


def test_qemu_reads_an_nbd_disk_and_reconnects():
    opts = vm.Disk('/i.img', readonly=True, nbd_socket='/s',
                   nbd_reconnect_s=60).drive_opts('d1').split(',')
    assert 'file.driver=nbd' in opts
    assert 'file.server.path=/s' in opts
    assert 'file.reconnect-delay=60' in opts
    assert 'readonly=on' in opts
    assert not any(o.startswith('aio=') for o in opts)


def test_app_queries_draw_their_own_keys():
    from puma_lab import appdb
    q = appdb.query(524288)
    assert q == 'SELECT length(v) FROM kv WHERE id=abs(random()) % 524288;'
