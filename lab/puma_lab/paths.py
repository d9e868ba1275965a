# SPDX-License-Identifier: Apache-2.0
"""Where lab/setup put the built stack, the guest kernels and the image."""

import dataclasses
import os
import subprocess

from puma_lab import errors

CACHE = os.environ.get('PUMA_CACHE', '/var/cache/puma')
RUN = os.environ.get('PUMA_RUN', '/run/puma-lab')
TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
KERNELS = ('6.1', '6.12')


def built(component):
    base = os.path.join(CACHE, component, 'current')
    if not os.path.exists(os.path.join(base, 'good')):
        raise errors.LabError(
            '%s is not built in %s (run lab/setup stack)' % (component, base))
    return os.path.realpath(base)


def qemu_prefix():
    """Prefix of the patched QEMU build ($PUMA_QEMU_PREFIX for a dev tree)."""
    return (os.environ.get('PUMA_QEMU_PREFIX') or
            os.path.join(built('qemu'), 'prefix'))


def libvirt_prefix():
    """Prefix of the patched libvirt build ($PUMA_LIBVIRT_PREFIX for dev)."""
    return (os.environ.get('PUMA_LIBVIRT_PREFIX') or
            os.path.join(built('libvirt'), 'prefix'))


def series_id(component):
    """The patch series id ('puma-empty', 'puma-<hash>') built into it."""
    with open(os.path.join(built(component), 'series-id')) as f:
        return f.read().strip()


def checkout_series_id(folder):
    """The id lab/setup gives the series in FOLDER of this checkout."""
    lib = os.path.join(TOP, 'lab', 'lib', 'common.sh')
    out = subprocess.run(['bash', '-c', '. "$0"; series_id "$1"', lib,
                          os.path.join(TOP, folder)],
                         capture_output=True, text=True, check=True)
    return 'puma-' + out.stdout.strip()


def qemu_binary():
    return os.path.join(qemu_prefix(), 'bin', 'qemu-system-x86_64')


def ivshmem_server():
    """QEMU's ivshmem-server, installed in its prefix by lab/setup stack."""
    return os.path.join(qemu_prefix(), 'bin', 'ivshmem-server')


def memory_server():
    """qemu-memory-server: $PUMA_MEMSRV_PREFIX/bin, else QEMU's prefix."""
    prefix = os.environ.get('PUMA_MEMSRV_PREFIX') or qemu_prefix()
    return os.path.join(prefix, 'bin', 'qemu-memory-server')


def qemu_img():
    return os.path.join(qemu_prefix(), 'bin', 'qemu-img')


@dataclasses.dataclass(frozen=True)
class Kernel:
    """One unpacked Debian guest kernel and its initramfs."""

    name: str
    release: str
    root: str

    @property
    def vmlinuz(self):
        return os.path.join(self.root, 'boot', 'vmlinuz-' + self.release)

    @property
    def vmlinux(self):
        """The ELF kernel of vmlinuz, booted through PVH (lab/setup)."""
        return os.path.join(os.path.dirname(self.root), 'vmlinux')

    @property
    def boot_image(self):
        """What QEMU's -kernel and libvirt's <kernel> boot.

        The PVH entry point of the ELF vmlinux skips the real-mode setup
        and the decompression of vmlinuz, about half of a TCG guest's boot.
        """
        if not os.path.exists(self.vmlinux):
            raise errors.LabError('guest kernel %s has no vmlinux for PVH '
                                  'boot (run lab/setup kernels)' % self.name)
        return self.vmlinux

    @property
    def kdir(self):
        return os.path.join(self.root, 'usr', 'src',
                            'linux-headers-' + self.release)

    @property
    def initrd(self):
        return os.path.join(image_dir(), 'initrd-%s.img' % self.name)


def kernel(name):
    """The guest kernel called NAME ('6.1' or '6.12')."""
    if name not in KERNELS:
        raise errors.LabError('unknown guest kernel %r (known: %s)'
                              % (name, ', '.join(KERNELS)))
    base = os.path.join(CACHE, 'kernels', name)
    if not os.path.exists(os.path.join(base, 'good')):
        raise errors.LabError('guest kernel %s is not installed '
                              '(run lab/setup kernels)' % name)
    with open(os.path.join(base, 'release')) as f:
        release = f.read().strip()
    return Kernel(name, release, os.path.join(base, 'root'))


@dataclasses.dataclass(frozen=True)
class BuiltKernel:
    """A kernel lab/setup built (no modules): the kernel hosts' own.

    It boots like the stock 6.12 (PVH entry of its ELF vmlinux, the lab's
    6.12 initramfs, which finds everything built in) and answers to the
    name ``base`` for what the image holds for that kernel.
    """

    name: str
    release: str
    vmlinux: str
    base: str = '6.12'

    @property
    def boot_image(self):
        return self.vmlinux

    @property
    def initrd(self):
        return os.path.join(image_dir(), 'initrd-%s.img' % self.base)


def khost_kernel():
    """The kernel-host kernel with our KSM series (lab/setup khost)."""
    base = os.path.join(CACHE, 'khost-kernel', 'current')
    if not os.path.exists(os.path.join(base, 'good')):
        raise errors.LabError('the kernel-host kernel is not built in %s '
                              '(run lab/setup khost)' % base)
    prefix = os.path.join(os.path.realpath(base), 'prefix')
    with open(os.path.join(prefix, 'release')) as f:
        release = f.read().strip()
    return BuiltKernel('khost', release, os.path.join(prefix, 'vmlinux'))


def image_dir():
    base = os.path.join(CACHE, 'image', 'current')
    if not os.path.exists(os.path.join(base, 'good')):
        raise errors.LabError('the guest image is not built in %s '
                              '(run lab/setup image)' % base)
    return os.path.realpath(base)


def root_image():
    return os.path.join(image_dir(), 'root.img')
