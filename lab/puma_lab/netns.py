# SPDX-License-Identifier: Apache-2.0
"""Network namespaces, veth links and bridges the lab creates.

Every name starts with ``puma-`` so that teardown (and the clean-up of a run
that crashed) finds exactly what the lab made and nothing else.
"""

import os
import signal
import subprocess
import time

from puma_lab import errors

PREFIX = 'puma-'


def run(*cmd, ns=None, check=True, timeout=60, input=None):
    """Run CMD (in netns NS if given); return its stdout."""
    argv = list(cmd)
    if ns:
        argv = ['ip', 'netns', 'exec', ns] + argv
    try:
        p = subprocess.run(argv, capture_output=True, text=True,
                           timeout=timeout, input=input)
    except subprocess.TimeoutExpired as e:
        raise errors.LabError('%s timed out after %ss'
                              % (' '.join(argv), timeout)) from e
    if check and p.returncode != 0:
        raise errors.LabError('%s failed (%d): %s'
                              % (' '.join(argv), p.returncode,
                                 (p.stderr or p.stdout).strip()))
    return p.stdout


def names():
    """The lab's namespaces that exist now."""
    out = run('ip', 'netns', 'list', check=False)
    return sorted(line.split()[0] for line in out.splitlines()
                  if line.startswith(PREFIX))


def pids(ns):
    out = run('ip', 'netns', 'pids', ns, check=False)
    return [int(p) for p in out.split()]


def add(ns):
    if not ns.startswith(PREFIX):
        raise errors.LabError('lab namespace %r must start with %r'
                              % (ns, PREFIX))
    run('ip', 'netns', 'add', ns)
    run('ip', 'link', 'set', 'lo', 'up', ns=ns)


def kill_all(ns, grace=5.0):
    """End every process in NS (all started by the lab): TERM, then KILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids(ns):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while pids(ns) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not pids(ns):
            return


def delete(ns):
    if ns not in names():
        return
    kill_all(ns)
    run('ip', 'netns', 'del', ns)


def add_bridge(ns, bridge='br0'):
    run('ip', 'link', 'add', bridge, 'type', 'bridge', ns=ns)
    run('ip', 'link', 'set', bridge, 'up', ns=ns)


def add_veth(ns_a, if_a, ns_b, if_b):
    """A veth pair with IF_A in NS_A and IF_B in NS_B."""
    run('ip', 'link', 'add', if_a, 'netns', ns_a, 'type', 'veth',
        'peer', 'name', if_b, 'netns', ns_b)


def add_tap(ns, tap, bridge='br0'):
    run('ip', 'tuntap', 'add', 'dev', tap, 'mode', 'tap', ns=ns)
    run('ip', 'link', 'set', tap, 'master', bridge, 'up', ns=ns)


def set_addr(ns, ifname, cidr):
    run('ip', 'addr', 'add', cidr, 'dev', ifname, ns=ns)
    run('ip', 'link', 'set', ifname, 'up', ns=ns)
