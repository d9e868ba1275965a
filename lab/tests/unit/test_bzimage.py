# SPDX-License-Identifier: Apache-2.0
"""The ELF vmlinux unpacked from a bzImage for PVH boot."""

import gzip
import lzma
import shutil
import struct
import subprocess

import pytest

from puma_lab import bzimage


def elf(note_type=bzimage.XEN_ELFNOTE_PHYS32_ENTRY, size=4096):
    """A minimal ELF64 whose one PT_NOTE segment holds a Xen note."""
    note = struct.pack('<III', 4, 4, note_type) + b'Xen\0' + b'\0' * 4
    phoff, phentsize = 64, 56
    note_off = phoff + phentsize
    head = bytearray(64)
    head[:6] = b'\x7fELF\x02\x01'
    struct.pack_into('<Q', head, 0x20, phoff)
    struct.pack_into('<HH', head, 0x36, phentsize, 1)
    ph = struct.pack('<IIQQQQQQ', 4, 0, note_off, 0, 0, len(note), len(note),
                     4)
    body = bytes(head) + ph + note
    return body + b'\0' * (size - len(body))


def bz(payload, setup_sects=1, version=0x20f, offset=16):
    """A bzImage-shaped file with PAYLOAD where its header says."""
    setup = bytearray((setup_sects + 1) * 512)
    setup[bzimage.SETUP_SECTS] = setup_sects
    setup[bzimage.HEADER_MAGIC:bzimage.HEADER_MAGIC + 4] = b'HdrS'
    struct.pack_into('<H', setup, bzimage.PROTOCOL_VERSION, version)
    struct.pack_into('<II', setup, bzimage.PAYLOAD, offset, len(payload))
    return bytes(setup) + b'\0' * offset + payload + b'\0' * 64


def sized(stream, plain):
    """STREAM with the decompressed size appended, as Kbuild does."""
    return stream + struct.pack('<I', len(plain))


def xz(plain):
    return sized(lzma.compress(plain, format=lzma.FORMAT_XZ), plain)


def write(tmp_path, data):
    p = tmp_path / 'vmlinuz'
    p.write_bytes(data)
    return str(p)


def test_xz_payload_is_unpacked(tmp_path):
    plain = elf()
    out = str(tmp_path / 'vmlinux')
    bzimage.extract(write(tmp_path, bz(xz(plain))), out)
    with open(out, 'rb') as f:
        assert f.read() == plain


def test_gzip_payload_is_unpacked(tmp_path):
    plain = elf()
    out = str(tmp_path / 'vmlinux')
    bzimage.extract(write(tmp_path, bz(sized(gzip.compress(plain), plain))),
                    out)
    with open(out, 'rb') as f:
        assert f.read() == plain


@pytest.mark.skipif(not shutil.which('zstd'), reason='no zstd command')
def test_zstd_payload_is_unpacked(tmp_path):
    plain = elf()
    stream = subprocess.run(['zstd', '-cq'], input=plain, check=True,
                            stdout=subprocess.PIPE).stdout
    out = str(tmp_path / 'vmlinux')
    bzimage.extract(write(tmp_path, bz(sized(stream, plain))), out)
    with open(out, 'rb') as f:
        assert f.read() == plain


def test_setup_sects_zero_means_four(tmp_path):
    plain = elf()
    data = bytearray(bz(xz(plain), setup_sects=4))
    data[bzimage.SETUP_SECTS] = 0
    out = str(tmp_path / 'vmlinux')
    bzimage.extract(write(tmp_path, bytes(data)), out)
    with open(out, 'rb') as f:
        assert f.read() == plain


@pytest.mark.parametrize('data, why', [
    (b'MZ' + b'\0' * 4096, 'not a bzImage'),
    (bz(b'x' * 8, version=0x207), 'no payload fields'),
    (bz(b'\x01\x02\x03\x04\x05\x06\0\0\0\0'), 'unknown payload compression'),
])
def test_what_is_not_a_kernel_is_refused(tmp_path, data, why):
    with pytest.raises(bzimage.BzImageError, match=why):
        bzimage.extract(write(tmp_path, data), str(tmp_path / 'vmlinux'))
    assert not (tmp_path / 'vmlinux').exists()


def test_payload_outside_the_image_is_refused(tmp_path):
    data = bytearray(bz(xz(elf())))
    struct.pack_into('<I', data, bzimage.PAYLOAD + 4, len(data))
    with pytest.raises(bzimage.BzImageError, match='outside'):
        bzimage.extract(write(tmp_path, bytes(data)),
                        str(tmp_path / 'vmlinux'))


def test_wrong_appended_size_is_refused(tmp_path):
    plain = elf()
    stream = lzma.compress(plain, format=lzma.FORMAT_XZ)
    data = bz(stream + struct.pack('<I', len(plain) + 1))
    with pytest.raises(bzimage.BzImageError, match='header says'):
        bzimage.extract(write(tmp_path, data), str(tmp_path / 'vmlinux'))


def test_kernel_without_pvh_entry_is_refused(tmp_path):
    data = bz(xz(elf(note_type=5)))
    with pytest.raises(bzimage.BzImageError, match='no PVH entry point'):
        bzimage.extract(write(tmp_path, data), str(tmp_path / 'vmlinux'))
    assert not (tmp_path / 'vmlinux').exists()


def test_command_line_reports_the_error(tmp_path, capsys):
    path = write(tmp_path, b'MZ' + b'\0' * 4096)
    assert bzimage.main(['bzimage', path, str(tmp_path / 'v')]) == 1
    assert 'not a bzImage' in capsys.readouterr().err
    assert bzimage.main(['bzimage']) == 2
