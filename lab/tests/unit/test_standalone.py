# SPDX-License-Identifier: Apache-2.0
"""The project stands alone: no file refers to material users never get."""

import subprocess

from puma_lab import paths

# The design notes the project grew from sat beside the repository; what
# it still relies on is in docs/design.md.
OUTSIDE = '../' + 'shared'


def test_no_file_refers_outside_the_repository():
    files = subprocess.run(['git', '-C', paths.TOP, 'ls-files', '-z'],
                           capture_output=True, check=True).stdout
    hits = []
    for name in files.decode().split('\0'):
        if not name:
            continue
        try:
            with open('%s/%s' % (paths.TOP, name), 'rb') as f:
                if OUTSIDE.encode() in f.read():
                    hits.append(name)
        except (IsADirectoryError, FileNotFoundError):
            continue
    assert not hits, 'files referring to %s: %s' % (OUTSIDE, hits)
