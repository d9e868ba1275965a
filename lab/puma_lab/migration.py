# SPDX-License-Identifier: Apache-2.0
"""Live migration of a libvirt guest between emulated hosts, verified.

Shared by the lab test, the demo and benchmarks: a guest is defined and
started on the source host, ``memverify`` keeps rewriting and checking a
checksummed memory region inside it, ``virsh migrate --live --p2p`` moves it
over TCP to the destination, and the checker then runs on for a while
before it is stopped and its verdict collected.
"""

import dataclasses
import time

from puma_lab import agent
from puma_lab import domain
from puma_lab import errors
from puma_lab import paths

PROGRESS = '/run/memverify.progress'


@dataclasses.dataclass
class Outcome:
    guest: str
    source: str
    destination: str
    migration_s: float
    rounds_before: int
    rounds_after: int
    verify: agent.ExecResult

    @property
    def ok(self):
        return self.verify.rc == 0 and 'corrupt=0' in self.verify.out


def start_guest(host, name, kernel='6.1', mem_mb=512, vcpus=2, **xml_opts):
    """Define and start NAME on HOST; wait for its agent.

    XML_OPTS go to domain.guest_xml (cpu, kvm_features, share).
    """
    xml = domain.guest_xml(name, paths.kernel(kernel),
                           host.lab.path('console-%s.log' % name),
                           mem_mb=mem_mb, vcpus=vcpus, **xml_opts)
    path = host.lab.path('%s.xml' % name)
    with open(path, 'w') as f:
        f.write(xml)
    host.virsh('define', path)
    host.virsh('start', name)
    return wait_agent(host, name)


def wait_agent(host, name, timeout=180):
    ga = agent.GuestAgent(agent.VirshTransport(host.virsh, name), name)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ga.ping(timeout=3):
            return ga
        time.sleep(1)
    raise errors.LabError('guest %s on host %s: agent not up within %ds'
                          % (name, host.name, timeout))


def parse_rounds(out, name):
    """Rounds in memverify's progress line OUT of guest NAME (0: none yet).

    A LabError once it found corruption.
    """
    if 'state=corrupt' in out:
        raise errors.LabError('memverify in %s found a corrupt page: %s'
                              % (name, out.strip()))
    for field in out.split():
        if field.startswith('rounds='):
            return int(field[len('rounds='):])
    return 0


def rounds(ga, path=PROGRESS):
    """Rounds memverify completed; a LabError once it found corruption."""
    return parse_rounds(ga.run('cat %s 2>/dev/null || true' % path).out,
                        ga.name)


def wait_rounds(ga, at_least, timeout=120, path=PROGRESS):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        n = rounds(ga, path)
        if n >= at_least:
            return n
        time.sleep(1)
    raise errors.LabError('memverify (%s) in %s made no progress'
                          % (path, ga.name))


def migrate_verified(src, dst, name, mib=64, rate=32, timeout=600):
    """Migrate running guest NAME from SRC to DST while memverify runs."""
    ga = wait_agent(src, name)
    pid = ga.spawn('exec memverify -m %d -t 3600 -r %d -p %s'
                   % (mib, rate, PROGRESS))
    before = wait_rounds(ga, 2)
    t0 = time.monotonic()
    src.virsh('migrate', '--live', '--p2p', '--persistent',
              '--undefinesource', '--verbose', name, dst.uri,
              timeout=timeout)
    took = time.monotonic() - t0
    if name not in dst.virsh('list', '--name').split():
        raise errors.LabError('%s is not running on %s after migration'
                              % (name, dst.name))
    ga = agent.GuestAgent(agent.VirshTransport(dst.virsh, name), name)
    after = wait_rounds(ga, rounds(ga) + 2)
    ga.run('kill -TERM %d' % pid)
    verdict = ga.wait(pid, timeout=120)
    return Outcome(name, src.name, dst.name, took, before, after, verdict)
