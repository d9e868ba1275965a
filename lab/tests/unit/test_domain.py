# SPDX-License-Identifier: Apache-2.0
"""The domain XML the lab hands to libvirt."""

from xml.etree import ElementTree

import pytest

from puma_lab import domain
from puma_lab import paths


@pytest.fixture
def k(monkeypatch, tmp_path):
    """A lab kernel, with the lab's QEMU and images at fixed paths."""
    monkeypatch.setattr(paths, 'qemu_binary', lambda: '/q/bin/qemu')
    monkeypatch.setattr(paths, 'root_image', lambda: '/img/root.img')
    monkeypatch.setattr(paths, 'image_dir', lambda: '/img')
    # The ELF vmlinux beside the unpacked root (PVH boot).
    (tmp_path / 'vmlinux').write_bytes(b'\x7fELF')
    return paths.Kernel('6.12', '6.12.95+deb12-amd64', str(tmp_path / 'root'))


def test_guest_xml_boots_the_lab_kernel(k, tmp_path):
    xml = domain.guest_xml("g<1>", k, '/run/c.log', mem_mb=384, vcpus=2,
                           append='x=1')
    root = ElementTree.fromstring(xml)
    assert root.get('type') == 'qemu'
    assert root.findtext('name') == 'g<1>'
    assert root.findtext('memory') == '384'
    assert root.findtext('vcpu') == '2'
    assert root.findtext('os/kernel') == str(tmp_path / 'vmlinux')
    assert root.findtext('os/initrd') == '/img/initrd-6.12.img'
    assert root.findtext('os/cmdline').endswith('puma.hostname=g<1> x=1')
    disk = root.find('devices/disk')
    assert disk.find('source').get('file') == '/img/root.img'
    assert disk.find('readonly') is not None
    assert root.find('devices/serial/source').get('path') == '/run/c.log'
    assert root.findtext('devices/emulator') == '/q/bin/qemu'


def test_guest_xml_data_disks(k):
    disks = (domain.disk_xml('/d/a&b.img', 'vdb', cache='writeback',
                             exclusive_cache='on'),
             domain.disk_xml('/d/c.img', 'vdc'))
    root = ElementTree.fromstring(domain.guest_xml('g', k, '/c.log',
                                                   disks=disks))
    vda, vdb, vdc = root.findall('devices/disk')
    assert vda.find('target').get('dev') == 'vda'
    assert vdb.find('source').get('file') == '/d/a&b.img'
    assert vdb.find('target').get('dev') == 'vdb'
    assert vdb.find('driver').attrib == {
        'name': 'qemu', 'type': 'raw', 'cache': 'writeback',
        'exclusive_cache': 'on'}
    assert vdc.find('driver').attrib == {'name': 'qemu', 'type': 'raw'}
