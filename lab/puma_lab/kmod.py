# SPDX-License-Identifier: Apache-2.0
"""Build guest-kmod/ against a lab guest kernel's headers."""

import lzma
import os
import shutil
import subprocess

from puma_lab import netns
from puma_lab import paths

# $PUMA_KMOD_SRC: another guest-kmod tree (a module under development).
KMOD_SRC = (os.environ.get('PUMA_KMOD_SRC') or
            os.path.join(paths.TOP, 'guest-kmod'))


def build(kernel, out_dir):
    """Build the modules for KERNEL (paths.Kernel) in a copy under OUT_DIR.

    Returns the directory holding the .ko files.  The source tree is copied
    so that builds for several kernels never share object files.
    """
    work = os.path.join(out_dir, 'kmod-' + kernel.name)
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(KMOD_SRC, work,
                    ignore=shutil.ignore_patterns('*.o', '*.ko', '.*.cmd'))
    netns.run('make', '-C', work, 'KDIR=' + kernel.kdir, timeout=600)
    return work


# The kernel crypto modules a Puma borrower needs for AES-GCM (seal.c):
# Debian builds them as modules, and guest images made before
# lab/lib/image.sh listed them lack them.  ship_crypto() puts them, with
# their dependencies, in a share; CRYPTO_LOAD loads them in the guest from
# the image if it has them, else from the share.
# The accelerated ones may not load (no AES-NI): gcm then builds on ctr
# and ghash_generic.
CRYPTO_MODULES = ('aesni_intel', 'ghash_clmulni_intel', 'ctr',
                  'ghash_generic', 'gcm')
CRYPTO_ROOT = 'modroot'
CRYPTO_LOAD = ('for m in {0}; do modprobe -q $m 2>/dev/null || '
               'modprobe -q -d /mnt/host/{1} $m; done; true'
               .format(' '.join(CRYPTO_MODULES), CRYPTO_ROOT))


def _unpack_module(src, dest):
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    if src.endswith('.xz'):
        with lzma.open(src) as f, open(dest, 'wb') as out:
            shutil.copyfileobj(f, out)
    elif src.endswith('.zst'):
        with open(dest, 'wb') as out:
            subprocess.run(['zstd', '-qdc', src], stdout=out, check=True)
    else:
        shutil.copy(src, dest)


def ship_crypto(kernel, share):
    """Copy CRYPTO_MODULES of KERNEL and their dependencies into SHARE.

    They land in SHARE/modroot/lib/modules/RELEASE with a modules.dep made
    by depmod, for modprobe -d in the guest (CRYPTO_LOAD).
    """
    src = os.path.join(kernel.root, 'lib', 'modules', kernel.release)
    dest = os.path.join(share, CRYPTO_ROOT, 'lib', 'modules', kernel.release)
    with open(os.path.join(src, 'modules.dep')) as f:
        deps = dict(line.split(':', 1) for line in f if ':' in line)

    def base(path):
        name = os.path.basename(path).split('.ko')[0]
        return name.replace('-', '_')

    want = set()
    for path, rest in deps.items():
        if base(path) in CRYPTO_MODULES:
            want.add(path)
            want.update(rest.split())
    for path in want:
        out = path[:path.index('.ko') + 3]
        _unpack_module(os.path.join(src, path), os.path.join(dest, out))
    for name in ('modules.builtin', 'modules.builtin.modinfo',
                 'modules.order'):
        if os.path.exists(os.path.join(src, name)):
            shutil.copy(os.path.join(src, name), dest)
    netns.run('depmod', '-b', os.path.join(share, CRYPTO_ROOT),
              kernel.release)
