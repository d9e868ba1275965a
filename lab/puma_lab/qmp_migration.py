# SPDX-License-Identifier: Apache-2.0
"""Live migration between two QEMU processes, driven over QMP.

Used by the split benchmark (and the split lab tests while libvirt cannot
drive split migration yet): the destination is a twin of the source
guest started with ``-incoming defer`` on another emulated host, both get
the capabilities of the chosen mode, and the source's ``query-migrate``
is polled until the migration ends.  Split mode and its memory server
come from our QEMU series; :func:`split_missing` says why they cannot be
used with the QEMU the lab points at.
"""

import asyncio
import functools
import json
import os
import queue
import subprocess
import threading
import time

import qemu.qmp
from qemu.qmp import legacy as qmp_legacy

from puma_lab import errors
from puma_lab import paths
from puma_lab import vm

# Capabilities set on both sides, per mode.  Free page hinting needs no
# capability: the balloon device (free-page-hint=on) drives it.
CAPABILITIES = {
    'precopy': {},
    'hinted': {},
    'postcopy': {'postcopy-ram': True, 'postcopy-blocktime': True},
    'split': {'x-split': True},
    'split-tls': {'x-split': True},
}
DONE = ('completed', 'failed', 'cancelled')


def balloon_args(hint, report=False):
    """A virtio-balloon with (or without) free page hinting + its iothread.

    REPORT turns free page reporting on: the guest reports free memory,
    QEMU discards it (and tells split migration it is unused).
    """
    return ['-object', 'iothread,id=balloon-io',
            '-device', 'virtio-balloon-pci,id=balloon0,iothread=balloon-io,'
                       'free-page-hint=%s,free-page-reporting=%s'
                       % ('on' if hint else 'off', 'on' if report else 'off')]


def wait_qmp(guest, timeout=60):
    """Wait until GUEST's QMP socket answers (e.g. a waiting twin)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return guest.qmp('query-status')
        except Exception as e:  # noqa: B902 - not listening yet
            if guest.proc.poll() is not None or \
                    time.monotonic() > deadline:
                raise errors.LabError('guest %s: no QMP: %s'
                                      % (guest.name, e))
            time.sleep(0.2)


def twin(guest, name, host, extra_args=(), env=None):
    """GUEST's machine on HOST, not started, waiting for its migration.

    ENV: variables for the twin's QEMU only (GUEST's are not inherited).
    """
    return vm.Guest(guest.lab, name, kernel=guest.kernel_name,
                    mem_mb=guest.mem_mb, vcpus=guest.vcpus,
                    disks=guest.disks, cpu=guest.cpu, append=guest.append,
                    extra_args=list(guest.extra_args) + list(extra_args) +
                    ['-incoming', 'defer'], ns=host.ns, events=guest.events,
                    env=env)


def set_capabilities(guest, caps):
    if caps:
        guest.qmp('migrate-set-capabilities', capabilities=[
            {'capability': k, 'state': v} for k, v in caps.items()])


class Migration:
    """One migration of SRC to DST (a twin on DST_HOST) in MODE."""

    def __init__(self, src, dst, dst_host, mode, params=None, port=4444):
        if mode not in CAPABILITIES:
            raise errors.LabError('unknown migration mode %r' % mode)
        self.src, self.dst, self.mode = src, dst, mode
        self.params = params or {}
        self.uri = 'tcp:%s:%d' % (dst_host.addr, port)
        self.postcopy_started = False
        self.info = None

    def start(self):
        """Set both sides up and start; QEMU's refusals as LabError."""
        caps = CAPABILITIES[self.mode]
        try:
            set_capabilities(self.src, caps)
            set_capabilities(self.dst, caps)
            if self.params:
                self.src.qmp('migrate-set-parameters', **self.params)
            self.dst.qmp('migrate-incoming', uri=self.uri)
            self.src.qmp('migrate', uri=self.uri)
        except qemu.qmp.QMPError as e:
            raise errors.LabError('%s migration of %s refused: %s'
                                  % (self.mode, self.src.name, e)) from e
        return self

    def poll(self):
        """The source's query-migrate; switches post-copy on when due.

        Post-copy starts after the first full pass over memory (the second
        dirty-bitmap sync), as is usual.
        """
        self.info = self.src.qmp('query-migrate')
        if (self.mode == 'postcopy' and not self.postcopy_started and
                self.info.get('status') == 'active' and
                self.info.get('ram', {}).get('dirty-sync-count', 0) >= 2):
            self.src.qmp('migrate-start-postcopy')
            self.postcopy_started = True
        return self.info

    def wait(self, timeout=900, interval=0.2):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = self.poll()
            if info.get('status') in DONE:
                if info['status'] != 'completed':
                    raise errors.LabError(
                        '%s migration of %s %s: %s' % (
                            self.mode, self.src.name, info['status'],
                            info.get('error-desc', '(no error given)')))
                return info
            time.sleep(interval)
        raise errors.LabError('%s migration of %s not done in %ds: %s'
                              % (self.mode, self.src.name, timeout,
                                 self.info))

    def cancel(self):
        self.src.qmp('migrate_cancel')


def wait_running(guest, timeout=60):
    """Wait until GUEST's QMP says it runs; its status otherwise."""
    deadline = time.monotonic() + timeout
    st = None
    while time.monotonic() < deadline:
        st = guest.qmp('query-status')
        if st.get('running'):
            return st
        time.sleep(0.2)
    raise errors.LabError('guest %s not running after %ds: %s'
                          % (guest.name, timeout, st))


class EventLog:
    """Collects the QMP events of a guest started with ``events=True``.

    The monitor lives in its own thread with its own asyncio loop, apart
    from the one the lab's other QMP connections use.  Its connection has
    QMP's ``oob`` capability (qemu.qmp enables it), so commands that allow
    it can run out of band on it (``oob``), also while QEMU's main loop
    waits.
    """

    def __init__(self, guest):
        self.guest = guest
        self.events = []
        self._requests = queue.Queue()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._error = None
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._error or not self._ready.is_set():
            raise errors.LabError('guest %s: cannot listen to events: %s'
                                  % (guest.name, self._error or 'timeout'))

    def _loop(self):
        asyncio.set_event_loop(asyncio.new_event_loop())
        mon = qmp_legacy.QEMUMonitorProtocol(self.guest.events_path)
        try:
            mon.connect()
        except Exception as e:  # noqa: B902 - reported by __init__
            self._error = e
            self._ready.set()
            return
        self._ready.set()
        try:
            while not self._stop.is_set():
                self._run_requests(mon)
                try:
                    ev = mon.pull_event(wait=0.5)
                except asyncio.TimeoutError:
                    continue
                if ev:
                    self.events.append(ev)
        except Exception:  # noqa: B902 - QEMU went away: stop reading
            pass
        finally:
            try:
                mon.close()
            except Exception:  # noqa: B902 - already gone
                pass

    def _run_requests(self, mon):
        while True:
            try:
                command, box, done = self._requests.get_nowait()
            except queue.Empty:
                return
            try:
                box['reply'] = mon.cmd_obj({'exec-oob': command})
            except Exception as e:  # noqa: B902 - reported by oob()
                box['error'] = e
            done.set()

    def oob(self, command, timeout=30):
        """COMMAND's return, run out of band on the events monitor.

        :raises errors.LabError: QEMU answered with an error (a command
            that does not allow out-of-band execution, say), or nothing
            within TIMEOUT seconds.
        """
        box, done = {}, threading.Event()
        self._requests.put((command, box, done))
        if not done.wait(timeout):
            raise errors.LabError('guest %s: no answer to out-of-band %s '
                                  'within %ds' % (self.guest.name, command,
                                                  timeout))
        reply = box.get('reply') or {}
        if 'error' in box or 'error' in reply:
            raise errors.LabError('guest %s: out-of-band %s: %s'
                                  % (self.guest.name, command,
                                     box.get('error') or reply['error']))
        return reply['return']

    def named(self, name):
        return [e for e in self.events if e.get('event') == name]

    def wait_for(self, name, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.named(name)
            if found:
                return found[0]
            time.sleep(0.2)
        raise errors.LabError('guest %s: no %s event within %ds (saw: %s)'
                              % (self.guest.name, name, timeout,
                                 sorted({e['event'] for e in self.events})))

    def close(self):
        self._stop.set()
        self._thread.join(5)


def _probe_qemu(binary):
    """The migration capabilities and commands BINARY offers."""
    lines = [{'execute': 'qmp_capabilities'},
             {'execute': 'query-migrate-capabilities', 'id': 'caps'},
             {'execute': 'query-commands', 'id': 'cmds'},
             {'execute': 'quit'}]
    p = subprocess.run([binary, '-machine', 'none', '-nodefaults',
                        '-display', 'none', '-qmp', 'stdio'],
                       input=''.join(json.dumps(m) + '\n' for m in lines),
                       capture_output=True, text=True, timeout=60)
    caps, cmds = set(), set()
    for line in p.stdout.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get('id') == 'caps':
            caps = {c['capability'] for c in msg['return']}
        elif msg.get('id') == 'cmds':
            cmds = {c['name'] for c in msg['return']}
    if not caps:
        raise errors.LabError('cannot query %s over QMP: %s'
                              % (binary, p.stderr.strip()))
    return caps, cmds


@functools.lru_cache(maxsize=None)
def _split_missing(binary, server):
    caps, cmds = _probe_qemu(binary)
    missing = []
    if 'x-split' not in caps:
        missing.append('%s offers no x-split migration capability' % binary)
    if 'x-query-split' not in cmds:
        missing.append('%s has no x-query-split command' % binary)
    if not os.access(server, os.X_OK):
        missing.append('no memory server at %s' % server)
    return '; '.join(missing) or None


def split_missing():
    """None if the lab's QEMU can split-migrate, else why it cannot."""
    return _split_missing(paths.qemu_binary(), paths.memory_server())
