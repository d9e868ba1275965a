# SPDX-License-Identifier: Apache-2.0
"""Split migration of one lab guest, through libvirt or straight over QMP.

Both drivers offer the same operations on a running guest so that the lab
tests and the demo read the same with either:

- :class:`VirshGuest`: a libvirt domain on emulated hosts with libvirtd,
  migrated with ``virsh migrate --live --p2p --split ...``; QMP through
  ``virsh qemu-monitor-command``, events through ``virsh
  qemu-monitor-event``.
- :class:`QmpGuest`: QEMU processes started by the lab on hosts without
  libvirtd, migrated with the x-split capability and parameters.

``migrate(..., mode='precopy')`` is a plain live migration instead (e.g.
of a guest that came by split migration).

:func:`missing` says why a driver cannot run with the lab's QEMU, memory
server and libvirt (tests skip with that reason).
"""

import json
import os
import signal
import subprocess
import threading
import time
import uuid

from puma_lab import agent
from puma_lab import errors
from puma_lab import host as host_mod
from puma_lab import migration
from puma_lab import netns
from puma_lab import paths
from puma_lab import profile
from puma_lab import qmp_migration
from puma_lab import vm

DRIVERS = profile.DRIVERS


def libvirt_missing():
    """None if the lab's virsh knows the split options, else why not."""
    virsh = os.path.join(paths.libvirt_prefix(), 'bin', 'virsh')
    p = subprocess.run([virsh, 'help', 'migrate'], capture_output=True,
                       text=True, timeout=60)
    if '--split-sub-host-uri' not in p.stdout:
        return '%s migrate has no --split options' % virsh
    return None


def missing(driver):
    """None if DRIVER can split-migrate in this lab, else the reason."""
    why = qmp_migration.split_missing()
    if driver == 'virsh':
        why = '; '.join(w for w in (why, libvirt_missing()) if w) or None
    return why


def make_hosts(lab, driver, names, authority=None):
    """Emulated hosts; with libvirtd only for the virsh driver.

    With AUTHORITY (a tls.Authority), each host gets certificates it
    signed, and libvirtd uses them for ``migrate --tls``.
    """
    hosts = []
    for n in names:
        h = host_mod.Host(lab, n, libvirtd=(driver == 'virsh'))
        if authority:
            h.tls_dir = authority.host_dir(lab.path('tls-%s' % n), n, h.addr)
        hosts.append(h.start())
    return hosts


def split_args(servers, limit):
    """SERVERS: one or two MemoryServer (or URI strings)."""
    uris = [s if isinstance(s, str) else s.uri for s in servers]
    return uris, int(limit)


class QmpGuest:
    """A guest started by the lab, moved between hosts over QMP."""

    def __init__(self, lab, host, name, kernel='6.1', mem_mb=512, vcpus=2):
        self.lab = lab
        self.name = name
        self.host = host
        self.hops = 0
        # One UUID for all its QEMUs, as libvirt does: the memory server
        # namespace of a VM is named after it.
        self.uuid = str(uuid.uuid4())
        self.vm = vm.Guest(lab, '%s-%s%d' % (name, host.name, 0),
                           kernel=kernel, mem_mb=mem_mb, vcpus=vcpus,
                           ns=host.ns, events=True,
                           extra_args=['-uuid', self.uuid])
        self.vm.start().wait_booted()
        self.mig = None
        self.dst = None
        self.dst_host = None
        self.events = None

    @property
    def agent(self):
        return self.vm.agent

    def qmp(self, cmd, **args):
        return self.vm.qmp(cmd, **args)

    def running(self):
        return self.vm.qmp('query-status')['status']

    def qemu_log(self):
        """What the guest's current QEMU wrote to stderr so far."""
        with open(self.vm.qemu_log, errors='replace') as f:
            return f.read()

    def migrate_start(self, dst_host, servers=(), limit=0, bandwidth=0,
                      mode='split', dst_env=None):
        self.hops += 1
        self.dst_host = dst_host
        self.dst = qmp_migration.twin(
            self.vm, '%s-%s%d' % (self.name, dst_host.name, self.hops),
            dst_host, env=dst_env).start()
        qmp_migration.wait_qmp(self.dst)
        params = {}
        if mode == 'split':
            uris, limit = split_args(servers, limit)
            params = {'x-split-sub-uris': ','.join(uris),
                      'x-split-main-limit': limit}
        else:
            # A guest that came by split migration still has x-split set
            # (it was set on its QEMU as a destination): not this time.
            self._split_off()
        if bandwidth:
            params['max-bandwidth'] = bandwidth * 1024 * 1024
        self.mig = qmp_migration.Migration(self.vm, self.dst, dst_host, mode,
                                           params)
        try:
            self.mig.start()
        except Exception:
            self._drop_destination()
            raise
        return self

    def _split_off(self):
        caps = self.vm.qmp('query-migrate-capabilities')
        if any(c['capability'] == 'x-split' and c['state'] for c in caps):
            qmp_migration.set_capabilities(self.vm, {'x-split': False})

    def migrate_wait(self, timeout=900):
        """Wait for the end; on success the guest lives on the destination."""
        try:
            self.mig.wait(timeout)
        except errors.LabError:
            self._drop_destination()
            raise
        qmp_migration.wait_running(self.dst)
        old, self.vm, self.host = self.vm, self.dst, self.dst_host
        old.stop()
        self.dst = self.mig = None
        if self.events:
            self.events.close()
            self.events = None

    def migrate(self, dst_host, servers=(), limit=0, **kw):
        self.migrate_start(dst_host, servers, limit, **kw)
        self.migrate_wait()

    def save_to_file(self, path, split=False, timeout=300):
        """Migrate to file:PATH, as a save does; x-split as SPLIT says.

        Returns (ok, error): ok when the migration completed, else
        query-migrate's error-desc.
        """
        qmp_migration.set_capabilities(self.vm, {'x-split': split})
        self.vm.qmp('migrate', uri='file:' + path)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = self.vm.qmp('query-migrate')
            if info.get('status') in ('completed', 'failed', 'cancelled'):
                return (info['status'] == 'completed',
                        info.get('error-desc', ''))
            time.sleep(0.2)
        raise errors.LabError('save of %s to %s still %s after %ds'
                              % (self.name, path, info.get('status'),
                                 timeout))

    def migration_progress(self):
        """{'status': query-migrate's, 'ram_transferred': bytes sent}."""
        info = self.mig.poll()
        return {'status': info.get('status', 'none'),
                'ram_transferred': info.get('ram', {}).get('transferred', 0)}

    def cancel(self):
        self.mig.cancel()

    def kill_destination(self):
        self.dst.proc.send_signal(signal.SIGKILL)
        self.dst.proc.wait(30)

    def wait_source_settled(self, timeout=120):
        """After a cancel or failure: the source runs and the twin is gone."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.mig.poll().get('status')
            if st in ('cancelled', 'failed'):
                break
            time.sleep(0.2)
        else:
            raise errors.LabError('migration still %s after %ds' % (st,
                                                                    timeout))
        qmp_migration.wait_running(self.vm)
        try:
            self.dst.proc.wait(60)
        except subprocess.TimeoutExpired:
            raise errors.LabError('destination QEMU %s still runs after the '
                                  'migration ended: %s'
                                  % (self.dst.name, st)) from None
        return st

    def _drop_destination(self):
        if self.dst is not None:
            self.dst.stop()

    def watch_events(self):
        self.events = qmp_migration.EventLog(self.vm)

    def wait_event(self, name, timeout=120):
        return self.events.wait_for(name, timeout)

    def qemu_left_on(self, host):
        """QEMU processes of this guest still running on HOST."""
        return [p for p in _ns_qemus(host) if self.name in p[1]]


class VirshGuest:
    """A libvirt domain, migrated with virsh."""

    def __init__(self, lab, host, name, kernel='6.1', mem_mb=512, vcpus=2):
        self.lab = lab
        self.name = name
        self.host = host
        migration.start_guest(host, name, kernel=kernel, mem_mb=mem_mb,
                              vcpus=vcpus)
        self._thread = None
        self._result = None
        self.dst_host = None
        self._events = None
        # The domain's UUID: QEMU's -uuid, the memory servers' VM id.
        self.uuid = host.virsh('domuuid', name).strip()

    @property
    def agent(self):
        return agent.GuestAgent(agent.VirshTransport(self.host.virsh,
                                                     self.name), self.name)

    def qmp(self, cmd, **args):
        msg = {'execute': cmd}
        if args:
            msg['arguments'] = args
        reply = json.loads(self.host.virsh('qemu-monitor-command', self.name,
                                           json.dumps(msg)))
        if 'error' in reply:
            raise errors.LabError('%s: %s' % (cmd, reply['error']))
        return reply['return']

    def running(self):
        return self.qmp('query-status')['status']

    def qemu_log(self):
        """The domain's log on its current host (QEMU's stderr)."""
        path = os.path.join(self.host.dir, 'log', 'qemu',
                            '%s.log' % self.name)
        with open(path, errors='replace') as f:
            return f.read()

    def _argv(self, dst_host, servers, limit, bandwidth, mode='split',
              tls=False):
        argv = ['migrate', '--live', '--p2p', '--persistent',
                '--undefinesource', '--verbose'] + (['--tls'] if tls else [])
        if mode != 'split':
            if bandwidth:
                argv += ['--bandwidth', str(bandwidth)]
            return argv + [self.name, dst_host.uri]
        argv.append('--split')
        uris = [s if isinstance(s, str) else s.uri for s in servers]
        if uris:
            argv += ['--split-sub-host-uri', uris[0]]
        if len(uris) > 1:
            argv += ['--split-mirror-uri', uris[1]]
        if limit is not None:
            argv += ['--split-main-limit', str(limit)]
        if bandwidth:
            argv += ['--bandwidth', str(bandwidth)]
        return argv + [self.name, dst_host.uri]

    def migrate_start(self, dst_host, servers=(), limit=0, bandwidth=0,
                      argv=None, mode='split', tls=False):
        self.dst_host = dst_host
        argv = argv or self._argv(dst_host, servers, limit, bandwidth, mode,
                                  tls)

        def run():
            try:
                self._result = self.host.virsh(*argv, timeout=900)
            except errors.LabError as e:
                self._result = e
        self._result = None
        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        # The job exists once virsh reached libvirtd.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self._thread.is_alive():
            job = self.host.virsh('domjobinfo', self.name, check=False)
            if 'Unbounded' in job or 'Bounded' in job:
                break
            time.sleep(0.2)
        return self

    def migrate_wait(self, timeout=900):
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise errors.LabError('virsh migrate still running after %ds'
                                  % timeout)
        if isinstance(self._result, Exception):
            raise self._result
        if self.name not in self.dst_host.virsh('list', '--name').split():
            raise errors.LabError('%s is not running on %s after migration'
                                  % (self.name, self.dst_host.name))
        self.host = self.dst_host
        self._stop_events()

    def migrate(self, dst_host, servers=(), limit=0, **kw):
        self.migrate_start(dst_host, servers, limit, **kw)
        self.migrate_wait()

    def save_to_file(self, path, timeout=300):
        """``virsh save`` to PATH; returns (ok, virsh's error)."""
        try:
            self.host.virsh('save', self.name, path, timeout=timeout)
        except errors.LabError as e:
            return False, str(e)
        return True, ''

    def migration_progress(self):
        """{'status': 'active' while the job runs, 'ram_transferred'}.

        From ``virsh domjobinfo --rawstats`` on the source: the job type
        (2, VIR_DOMAIN_JOB_UNBOUNDED, while it runs) and
        ``memory_processed``.
        """
        out = self.host.virsh('domjobinfo', '--rawstats', self.name,
                              check=False)
        fields = dict(line.split(': ', 1) for line in out.splitlines()
                      if ': ' in line)
        jobtype = fields.get('Job type', '0').strip()
        return {'status': 'active' if jobtype == '2' else 'none',
                'ram_transferred': int(fields.get('memory_processed', 0)),
                'raw': out}

    def cancel(self):
        self.host.virsh('domjobabort', self.name)

    def kill_destination(self):
        pidfile = os.path.join(self.dst_host.dir, 'run', 'qemu',
                               '%s.pid' % self.name)
        deadline = time.monotonic() + 60
        while not os.path.exists(pidfile):
            if time.monotonic() > deadline:
                raise errors.LabError('no QEMU for %s on %s'
                                      % (self.name, self.dst_host.name))
            time.sleep(0.2)
        with open(pidfile) as f:
            os.kill(int(f.read().strip()), signal.SIGKILL)

    def wait_source_settled(self, timeout=120):
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise errors.LabError('virsh migrate still running after %ds'
                                  % timeout)
        if not isinstance(self._result, Exception):
            raise errors.LabError('migration succeeded: %s' % self._result)
        deadline = time.monotonic() + timeout
        while self.host.virsh('domstate', self.name).strip() != 'running':
            if time.monotonic() > deadline:
                raise errors.LabError('%s not running on %s after the failed '
                                      'migration' % (self.name,
                                                     self.host.name))
            time.sleep(0.5)
        return str(self._result)

    def watch_events(self):
        """Log QEMU's events and libvirt's lifecycle events of the domain."""
        self._events = []
        self._events_log = {}
        virsh = ['nsenter', '-t', str(self.host.proc.pid), '-m', '-n',
                 os.path.join(self.host.prefix, 'bin', 'virsh'),
                 '-c', host_mod.URI]
        for kind, args in (('qemu', ['qemu-monitor-event']),
                           ('lifecycle', ['event', '--event', 'lifecycle'])):
            log = self.lab.path('events-%s-%s-%s.log'
                                % (kind, self.name, self.host.name))
            self._events_log[kind] = log
            with open(log, 'w') as f:
                self._events.append(subprocess.Popen(
                    virsh + args + ['--domain', self.name, '--loop'],
                    stdin=subprocess.DEVNULL, stdout=f, stderr=f))

    def _wait_line(self, kind, needle, what, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(self._events_log[kind]) as f:
                for line in f:
                    if needle in line:
                        return line.strip()
            time.sleep(0.2)
        raise errors.LabError('no %s for %s within %ds'
                              % (what, self.name, timeout))

    def wait_event(self, name, timeout=120):
        """The line of QEMU's event NAME (through libvirt)."""
        return self._wait_line('qemu', 'event %s ' % name,
                               '%s event' % name, timeout)

    def wait_lifecycle(self, detail, timeout=120):
        """The line of libvirt's lifecycle event with DETAIL.

        DETAIL as virsh prints it, e.g. 'Suspended Memory server lost'.
        """
        return self._wait_line('lifecycle', ': %s' % detail,
                               'lifecycle event "%s"' % detail, timeout)

    def state_reason(self):
        """``virsh domstate --reason``, e.g. 'paused (user)'."""
        return self.host.virsh('domstate', '--reason', self.name).strip()

    def _stop_events(self):
        for proc in self._events or ():
            proc.terminate()
            proc.wait(10)
        self._events = None

    def qemu_left_on(self, host):
        left = [p for p in _ns_qemus(host) if self.name in p[1]]
        doms = host.virsh('list', '--all', '--name').split()
        return left + [('domain', d) for d in doms if d == self.name]


def _ns_qemus(host):
    """(pid, command line) of the QEMU processes in HOST's namespace."""
    found = []
    for pid in netns.pids(host.ns):
        try:
            with open('/proc/%d/cmdline' % pid, 'rb') as f:
                cmd = f.read().replace(b'\0', b' ').decode(errors='replace')
        except OSError:
            continue
        if 'qemu-system' in cmd.split(' ')[0]:
            found.append((pid, cmd))
    return found


def start_workload(g, mib, rate):
    """memverify on MIB rewritten at RATE MiB/s in guest G; its pid."""
    pid = g.agent.spawn('exec memverify -m %d -t 36000 -r %d -p %s'
                        % (mib, rate, migration.PROGRESS))
    migration.wait_rounds(g.agent, 1, timeout=300)
    return pid


def walk(g, n=2):
    """Let memverify check and rewrite its whole working set N times."""
    ga = g.agent
    return migration.wait_rounds(ga, migration.rounds(ga) + n, timeout=600)


def stop_workload(g, pid):
    """End memverify after a last full check; its result."""
    g.agent.run('kill -TERM %d' % pid)
    return g.agent.wait(pid, timeout=300)


def make_guest(driver, lab, host, name, **kw):
    cls = {'qmp': QmpGuest, 'virsh': VirshGuest}[driver]
    return cls(lab, host, name, **kw)
