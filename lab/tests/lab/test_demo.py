# SPDX-License-Identifier: Apache-2.0
"""README's demo, as a newcomer runs it: every part reports success.

This runs the demo program itself (lab/demo minus setup and cleanup,
which the test run does once) and reads its output line by line: each
part must print its figures and an OK result, in README's order.  The
last part, a split migration through the lab cloud, runs in the cloud
env against the session's cloud (lab/tests/cloud/test_cloud_demo.py):
the two envs run side by side, and one machine has one lab cloud.
"""

import os
import re
import subprocess
import sys

from puma_lab import paths

# One pattern per line the demo must print, in order.
EXPECTED = [
    r'^Puma lab demo: QEMU puma-\w+, libvirt puma-\w+$',
    r'^host a: netns \S+, address [\d.]+, libvirtd pid \d+$',
    r'^host b: netns \S+, address [\d.]+, libvirtd pid \d+$',
    r'^guest demo-vm: kernel \S+, 512 MiB, 2 vCPUs \(TCG\), running on '
    r'host a$',
    r'^migration took [\d.]+ s; guest now running on host b$',
    r'^verification: .*corrupt=0',
    r'^RESULT: OK, no corruption$',
    r'^split migration: memory server on host c \(\S+\)$',
    r'^migration took [\d.]+ s; split-vm runs on host b$',
    r'^x-query-split: state \S+; pages resident \d+, remote \d+, unused '
    r'\d+; page-ins [1-9]\d*, page-outs \d+',
    r'^verification: .*corrupt=0',
    r'^RESULT: OK, paged from host c, no corruption$',
    r'^first read: [\d.]+ s, [1-9]\d* reads reached the disk; after '
    r'drop_caches the lender hosts [1-9]\d* pages$',
    r'^second read: [\d.]+ s, \d+ reads reached the disk; [1-9]\d* gets, '
    r'[1-9]\d* hits',
    r'^sha256 of the file: the same both times$',
    r'^RESULT: OK, the lender served the second read$',
    r'^shootdown latency p50: [\d.]+ us with IPIs, [\d.]+ us with Shoot4U',
    r'^TLB IPIs received: [1-9]\d* with IPIs, \d+ with Shoot4U; [1-9]\d* '
    r'hypercalls$',
]


def test_demo_prints_every_part_and_succeeds():
    env = dict(os.environ, PYTHONPATH=os.path.join(paths.TOP, 'lab'))
    p = subprocess.run([sys.executable, '-m', 'puma_lab.demo', '--no-cloud'],
                       capture_output=True, text=True, timeout=1800, env=env)
    logs = os.environ.get('PUMA_LOGS')
    if logs:
        os.makedirs(logs, exist_ok=True)
        with open(os.path.join(logs, 'demo.out'), 'w') as f:
            f.write(p.stdout + '\n--- stderr ---\n' + p.stderr)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    lines = p.stdout.splitlines()
    assert not [ln for ln in lines if 'FAILED' in ln or 'skipped' in ln], \
        p.stdout
    pos = 0
    for pattern in EXPECTED:
        for i in range(pos, len(lines)):
            if re.search(pattern, lines[i]):
                pos = i + 1
                break
        else:
            raise AssertionError('the demo did not print a line matching '
                                 '%r after line %d:\n%s'
                                 % (pattern, pos, p.stdout))
