# SPDX-License-Identifier: Apache-2.0
"""README's demo, its last part: a split migration through ``openstack``.

``./lab/demo`` ends with :mod:`puma_lab.demo_cloud`, which brings a lab
cloud up when none is up.  Here the session's cloud is up, so the part
uses it (as with ``./lab/cloud up`` first) and leaves it up; it runs as
the program the demo runs, and its output is read line by line as
test_demo.py reads the rest of the demo's.
"""

import os
import re
import subprocess
import sys

from puma_lab import paths

EXPECTED = [
    r'^cloud: using the lab cloud that is up in \S+$',
    r'^server demo-split \(flavor \S+: 512 MiB, puma:split=allowed\): '
    r'ACTIVE on host a in \d+ s; its working set verified \d+ rounds$',
    r'^host b is modelled with \d+ MiB free; openstack server migrate '
    r'--live-migration --host b demo-split \.\.\.$',
    r'^openstack server migration list: a -> b completed; demo-split is '
    r'ACTIVE on host b \(\d+ s\)$',
    r'^openstack puma ledger: main host b keeps \d+ MiB, sub host c holds '
    r'\d+ MiB \((running|done)\)$',
    r'^x-query-split on b: state active; pages resident \d+, remote '
    r'[1-9]\d*, unused \d+; page-ins \d+, page-outs \d+$',
    r'^working set: verified through round \d+ after the move$',
    r'^RESULT: OK, split-migrated through OpenStack, server deleted, '
    r'nothing left reserved$',
]


def test_demo_cloud_part(cloud):
    env = dict(os.environ, PYTHONPATH=os.path.join(paths.TOP, 'lab'))
    p = subprocess.run([sys.executable, '-m', 'puma_lab.demo_cloud'],
                       capture_output=True, text=True, timeout=1200, env=env)
    print(p.stdout)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    lines = p.stdout.splitlines()
    pos = 0
    for pattern in EXPECTED:
        for i in range(pos, len(lines)):
            if re.search(pattern, lines[i]):
                pos = i + 1
                break
        else:
            raise AssertionError('the cloud demo did not print a line '
                                 'matching %r after line %d:\n%s'
                                 % (pattern, pos, p.stdout))
