# SPDX-License-Identifier: Apache-2.0
"""Build guest-kmod/ against a lab guest kernel's headers."""

import os
import shutil

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
