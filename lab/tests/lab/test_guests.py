# SPDX-License-Identifier: Apache-2.0
"""Real guests: both kernels boot, load our module, talk and use disks."""

import hashlib
import os
import shutil

import pytest

from puma_lab import kmod
from puma_lab import paths
from puma_lab import vm

BAD_DMESG = ('BUG:', 'Oops', 'WARNING:', 'Call Trace', 'general protection')


@pytest.mark.parametrize('kernel', paths.KERNELS)
def test_module_builds_and_loads(lab, kernel):
    k = paths.kernel(kernel)
    share = lab.path('share')
    os.makedirs(share)
    built = kmod.build(k, lab.path('build'))
    shutil.copy(os.path.join(built, 'puma.ko'), share)
    g = vm.Guest(lab, 'k' + kernel.replace('.', ''), kernel=kernel,
                 mem_mb=512, vcpus=2, share=share).start().wait_booted()
    assert g.run('uname -r').out.strip() == k.release
    g.run('insmod /mnt/host/puma.ko')
    assert g.run('cat /sys/kernel/puma/build_release').out.strip() == \
        k.release
    assert g.run('grep -c "^puma " /proc/modules').out.strip() == '1'
    g.run('rmmod puma')
    assert g.run('test -e /sys/kernel/puma', check=False).rc == 1
    dmesg = g.run('dmesg').out
    assert 'puma: version' in dmesg
    for bad in BAD_DMESG:
        assert bad not in dmesg, dmesg


def test_guests_link_and_throttled_disk(lab, tmp_path):
    payload = tmp_path / 'payload'
    payload.mkdir()
    blob = os.urandom(3 * 1024 * 1024)
    (payload / 'blob').write_bytes(blob)
    disk = vm.make_data_disk(lab.path('data.img'), 64, str(payload))
    disk.iops, disk.bps, disk.serial = 200, 8 * 1024 * 1024, 'vol1'
    a = vm.Guest(lab, 'a', kernel='6.1', nics=1, disks=[disk]).start()
    b = vm.Guest(lab, 'b', kernel='6.12', nics=1).start()
    a.wait_booted()
    b.wait_booted()
    # virtio-net link between the guests.
    b_ip = b.addrs[0].split('/')[0]
    a.run('ping -c 3 -W 5 %s' % b_ip)
    # The throttled data disk: limits applied in QEMU, contents intact.
    dev = [d for d in a.qmp('query-block') if d['device'] == 'd1'][0]
    assert dev['inserted']['file'].endswith('data.img')
    assert dev['inserted']['iops'] == 200
    assert dev['inserted']['bps'] == 8 * 1024 * 1024
    a.run('mkdir -p /mnt/data && mount /dev/vdb /mnt/data')
    got = a.run('sha256sum /mnt/data/blob').out.split()[0]
    assert got == hashlib.sha256(blob).hexdigest()
    fio = a.run('fio --name=w --filename=/mnt/data/f --size=8M --bs=64k '
                '--rw=write --direct=1 --output-format=terse', timeout=300)
    assert fio.out.split(';')[0] == '3'
