# SPDX-License-Identifier: Apache-2.0
"""The disk model: dilation, per-class delays, nbdkit and QEMU options."""

import os
import subprocess
import time

import pytest

from puma_lab import diskmodel
from puma_lab import errors
from puma_lab import paths
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


class FakeLab:
    """What ModelledDisk uses of a lab: a directory and a register."""

    def __init__(self, path):
        self.dir = str(path)
        self.guests = []

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def register(self, thing, kind):
        self.guests.append(thing)


def test_qemu_reads_on_after_the_delay_changes(tmp_path):
    """Real nbdkit and QEMU's NBD client: a new delay, the same reader.

    qemu-io reads, waits while the bench's set_delay replaces nbdkit by
    one with another delay, and reads again on the same connection
    object: QEMU reconnects (with SIGTERM instead of SIGKILL it gave the
    export up: "Cannot send after transport endpoint shutdown").
    """
    image = tmp_path / 'img'
    image.write_bytes(os.urandom(1 << 20))
    lab = FakeLab(tmp_path)
    disk = diskmodel.ModelledDisk(lab, 'd', str(image), delay_ms=5).start()
    try:
        opts = ('driver=raw,file.driver=nbd,file.server.type=unix,'
                'file.server.path=%s,file.reconnect-delay=30' % disk.socket)
        reader = subprocess.Popen(
            [os.path.join(paths.qemu_prefix(), 'bin', 'qemu-io'), '-r',
             '--image-opts', opts, '-c', 'read 0 4k', '-c', 'sleep 3000',
             '-c', 'read 4k 4k'],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(1)
        old = disk.proc.pid
        disk.set_delay(20)
        out, _ = reader.communicate(timeout=120)
        assert disk.proc.pid != old
        with open('/proc/%d/cmdline' % disk.proc.pid) as f:
            assert 'rdelay=20ms' in f.read().split('\0')
        assert reader.returncode == 0, out
        assert out.count('read 4096/4096 bytes') == 2, out
    finally:
        disk.stop()
    assert lab.guests == [disk]
