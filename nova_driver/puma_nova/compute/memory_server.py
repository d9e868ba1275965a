# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Memory server processes of this host (sub host of split instances).

One ``qemu-memory-server --listen ADDR:PORT --max-memory SIZE --vm UUID``
per split instance whose memory this host serves (``--vm``: it serves
that instance alone), TLS only when given a directory of x509
certificates (then it accepts only clients with a certificate of the
same authority, ``verify-peer=on``), else with ``--insecure`` and a
warning in the log. Given the client hosts of an
instance and the form of their certificates' names, its server accepts
only those hosts: an ``authz-listfile`` next to the state file lists
their distinguished names, and the server reloads it when it changes.

The processes run in their own session so that they outlive a restart of
nova-compute (the instances on the main hosts depend on them); their pid
and port are kept in a JSON state file so a restarted nova-compute finds
and stops them.

``check()`` supervises them: a server that is gone (killed, crashed, the
host rebooted) is started again, empty, on the same port with the same
size, TLS and admitted clients, so that the main host's QEMU reconnects
to it. QEMU never reads a page from a restarted server (it finds the
server holding fewer pages than it should and marks every copy there
stale): a mirrored instance copies its remote pages onto it from the
other server and is redundant again; an unmirrored one stays paused,
its remote memory lost with the server.

With a watchdog timeout, each server also gets a notify socket in the
state directory (``NOTIFY_SOCKET``, ``WATCHDOG_USEC``: the protocol of
systemd's ``WatchdogSec=``, service_notify.py), on which its main loop
says ``WATCHDOG=1`` every half of the timeout. A server that is alive but
silent for longer (its main loop hung, the process stopped) serves no
one: ``check()`` kills it and starts it again as one that is gone. Only
servers that have said ``WATCHDOG=1`` once are held to it (a binary that
does not speak the protocol is never killed for its silence). The server's
counters come with each ``WATCHDOG=1`` (``STATUS=namespaces=1 pages=3
...``): each check keeps the latest in the state file, where
puma-exporter reads them.
"""

import errno
import json
import os
import signal
import socket
import subprocess
import threading
import time

from oslo_log import log as logging
from oslo_utils import fileutils

from puma_nova.compute import service_notify

LOG = logging.getLogger(__name__)

STATE_FILE = 'memory-servers.json'


class MemoryServerError(Exception):
    pass


def _alive(pid):
    try:
        os.kill(pid, 0)
    except OSError as e:
        return e.errno == errno.EPERM
    # A zombie child still "exists"; treat it as gone.
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().split(')')[-1].split()[0] != 'Z'
    except OSError:
        return False


def _cmdline(pid):
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            return f.read().decode(errors='replace').split('\0')
    except OSError:
        return []


def _serves(pid, port, address=None):
    """Whether PID runs a memory server that listens on ADDRESS:PORT.

    Without ADDRESS (a reader that does not know it), on any address.
    After a reboot a recorded pid may belong to another process.
    """
    if not _alive(pid):
        return False
    args = _cmdline(pid)
    if '--listen' not in args:
        return False
    if address is not None:
        return '%s:%d' % (address, port) in args
    return any(a.endswith(':%d' % port) for a in args)


# What qemu-memory-server counts, in its STATUS= notifications.
COUNTERS = ('namespaces', 'pages', 'limit', 'puts', 'gets', 'discards',
            'errors', 'connections')


def parse_status(text):
    """{counter: int} of the server's STATUS= text; {} for other text."""
    counters = {}
    for word in text.split():
        key, sep, value = word.partition('=')
        if sep and key in COUNTERS and value.isdigit():
            counters[key] = int(value)
    return counters


def _resident_bytes(pid):
    with open('/proc/%d/statm' % pid) as f:
        return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')


def read_servers(state_dir):
    """The memory servers of a host, as another process sees them.

    For puma-exporter: read-only, from nova-compute's state file in
    STATE_DIR. Returns {instance uuid: {'port', 'size_mb', 'tls',
    'restarts', 'hangs', 'up', 'resident_bytes', 'counters'}}: ``up``
    when the recorded pid runs a server that listens on the recorded
    port, ``resident_bytes`` its resident memory (the pages it holds, and
    its own), 0 when down, ``counters`` what it last said of itself
    (COUNTERS, as of nova-compute's last check), {} when down.
    Nothing when the file is missing (not a sub host yet).
    """
    try:
        with open(os.path.join(state_dir, STATE_FILE)) as f:
            servers = json.load(f)
    except FileNotFoundError:
        return {}
    found = {}
    for instance_uuid, server in servers.items():
        pid, port = server['pid'], server['port']
        up = _serves(pid, port)
        resident = 0
        if up:
            try:
                resident = _resident_bytes(pid)
            except (OSError, ValueError, IndexError):
                up = False
        found[instance_uuid] = {
            'port': port, 'size_mb': server['size_mb'],
            'tls': server.get('tls', False),
            'restarts': server.get('restarts', 0),
            'hangs': server.get('hangs', 0), 'up': up,
            'resident_bytes': resident,
            'counters': server.get('counters', {}) if up else {}}
    return found


class MemoryServers(object):

    def __init__(self, state_dir, binary, address, port_min, port_max,
                 ready_timeout=10.0, tls_x509_dir=None, client_dn=None,
                 watchdog_timeout=0):
        if port_min > port_max:
            raise MemoryServerError('memory server port range %d-%d is '
                                    'empty' % (port_min, port_max))
        self._watchdog_timeout = watchdog_timeout
        if watchdog_timeout and len(os.fsencode(self._notify_path_in(
                state_dir, '0' * 36))) > service_notify.MAX_PATH_BYTES:
            raise MemoryServerError(
                'memory server state directory %r is too long for the '
                'notify sockets of the memory servers\' watchdog (at most '
                '%d bytes with the socket name): use a shorter '
                'instances_path, or set [puma] '
                'memory_server_watchdog_timeout = 0'
                % (state_dir, service_notify.MAX_PATH_BYTES))
        self._tls_x509_dir = tls_x509_dir
        # e.g. 'CN={host}': the name of a host's client certificate.
        self._client_dn = client_dn
        self._state_dir = state_dir
        self._binary = binary
        self._address = address
        self._ports = range(port_min, port_max + 1)
        self._ready_timeout = ready_timeout
        self._lock = threading.Lock()
        self._children = {}
        # Watchdog: instance uuid -> its NotifySocket, when its server
        # last said WATCHDOG=1 and when its socket was last read
        # (monotonic).
        self._notify = {}
        self._last_ping = {}
        self._last_read = {}
        fileutils.ensure_tree(state_dir)
        self._servers = self._load()
        if watchdog_timeout:
            # Servers started before this process find their socket again
            # (the same path), with a whole timeout to say WATCHDOG=1.
            for instance_uuid in sorted(self._servers):
                self._open_notify(instance_uuid)

    @property
    def _state_path(self):
        return os.path.join(self._state_dir, STATE_FILE)

    def _load(self):
        try:
            with open(self._state_path) as f:
                servers = json.load(f)
        except FileNotFoundError:
            return {}
        except ValueError as e:
            # Keep the unreadable file for the operator; nothing is lost.
            broken = self._state_path + '.broken'
            os.replace(self._state_path, broken)
            LOG.error('Unreadable memory server state %s moved to %s: %s',
                      self._state_path, broken, e)
            return {}
        # A server that is gone stays recorded: check() starts it again.
        for gone in sorted(u for u, srv in servers.items()
                           if not self._is_ours(srv)):
            LOG.warning('Memory server of instance %s (pid %d, port %d) '
                        'is gone', gone, servers[gone]['pid'],
                        servers[gone]['port'])
        return servers

    def _is_ours(self, server):
        """Whether pid still runs the memory server we started.

        After a reboot the pid may belong to another process: never
        signal a process that does not listen where ours did.
        """
        return _serves(server['pid'], server['port'], self._address)

    def _save(self):
        tmp = self._state_path + '.tmp'
        with open(tmp, 'w') as f:
            json.dump(self._servers, f, indent=1, sort_keys=True)
        os.replace(tmp, self._state_path)

    @staticmethod
    def _notify_path_in(state_dir, instance_uuid):
        return os.path.join(state_dir,
                            'memory-server-%s.notify' % instance_uuid)

    def _open_notify(self, instance_uuid):
        """The watchdog socket of an instance's server, bound anew."""
        sock = self._notify.pop(instance_uuid, None)
        if sock is not None:
            sock.close()
        try:
            self._notify[instance_uuid] = service_notify.NotifySocket(
                self._notify_path_in(self._state_dir, instance_uuid))
        except OSError as e:
            raise MemoryServerError('cannot make the watchdog socket of '
                                    'the memory server of %s: %s'
                                    % (instance_uuid, e))
        self._last_ping[instance_uuid] = time.monotonic()
        self._last_read[instance_uuid] = self._last_ping[instance_uuid]

    def _close_notify(self, instance_uuid):
        sock = self._notify.pop(instance_uuid, None)
        if sock is not None:
            sock.close()
        self._last_ping.pop(instance_uuid, None)
        self._last_read.pop(instance_uuid, None)

    def _hung(self, instance_uuid, server):
        """Whether a running server's watchdog expired.

        Reads what it said since the last check; only its own pid's
        messages count. Marks a server that said WATCHDOG=1 as one that
        speaks the protocol (check() records it, so that a restarted
        nova-compute holds it to it too), and keeps the counters of its
        last STATUS=.
        """
        sock = self._notify.get(instance_uuid)
        if sock is None:
            return False
        now = time.monotonic()
        # What waits was sent since the previous read: the kernel's
        # timestamp says when, bounded by that read (the wall clock may
        # have stepped).
        read_before = self._last_read.get(instance_uuid, now)
        self._last_read[instance_uuid] = now
        wall = time.time()
        for pid, fields, sent in sock.receive():
            if pid != server['pid']:
                continue
            if fields.get('WATCHDOG') == '1':
                # A server that hung right after a WATCHDOG=1 that waited
                # here has been silent since it sent it, not since now.
                age = 0.0 if sent is None else wall - sent
                at = now - min(max(age, 0.0), now - read_before)
                self._last_ping[instance_uuid] = max(
                    at, self._last_ping.get(instance_uuid, at))
                server['watchdog'] = True
            counters = parse_status(fields.get('STATUS', ''))
            if counters:
                server['counters'] = counters
        silent = now - self._last_ping.get(instance_uuid, now)
        return bool(server.get('watchdog') and
                    silent > self._watchdog_timeout)

    def _uri(self, port):
        return 'tcp:%s:%d' % (self._address, port)

    def _authz_path(self, instance_uuid):
        return os.path.join(self._state_dir,
                            'memory-server-%s.authz.json' % instance_uuid)

    def _write_authz(self, instance_uuid, clients):
        """The authz-listfile that admits only CLIENTS (host names)."""
        try:
            rules = [{'match': self._client_dn.format(host=h),
                      'policy': 'allow', 'format': 'exact'}
                     for h in sorted(clients)]
        except (KeyError, IndexError, ValueError) as e:
            raise MemoryServerError('invalid [puma] memory_server_client_dn '
                                    '%r (only {host} may be named): %s'
                                    % (self._client_dn, e))
        path = self._authz_path(instance_uuid)
        tmp = path + '.tmp'
        with open(tmp, 'w') as f:
            json.dump({'rules': rules, 'policy': 'deny'}, f, indent=1)
        os.replace(tmp, path)
        return path

    def _update_clients(self, instance_uuid, server, clients):
        """Admit CLIENTS too to a running server that has a list."""
        if not clients or server.get('clients') is None:
            return
        merged = sorted(set(server['clients']) | set(clients))
        if merged != server['clients']:
            LOG.info('Memory server of instance %s now admits %s',
                     instance_uuid, ', '.join(merged))
            self._write_authz(instance_uuid, merged)
            server['clients'] = merged
            self._save()

    def _bindable(self, port):
        """Whether a server could listen on PORT now.

        As a server would: with SO_REUSEADDR, which ignores connections
        left in TIME_WAIT.
        """
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((self._address, port))
            except OSError:
                return False
        return True

    def _free_port(self):
        used = {s['port'] for s in self._servers.values()}
        for port in self._ports:
            if port not in used and self._bindable(port):
                return port
        raise MemoryServerError('no free memory server port in %d-%d'
                                % (self._ports[0], self._ports[-1]))

    def _wait_ready(self, child, port, log_path):
        deadline = time.monotonic() + self._ready_timeout
        while time.monotonic() < deadline:
            if child.poll() is not None:
                break
            try:
                with socket.create_connection((self._address, port),
                                              timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        self._kill(child.pid, child)
        with open(log_path, errors='replace') as f:
            tail = f.read()[-2000:]
        raise MemoryServerError(
            'memory server %s did not listen on %s:%d (exit status %s): %s'
            % (self._binary, self._address, port, child.poll(), tail))

    def start(self, instance_uuid, size_mb, clients=None):
        """Start (or find) the memory server of an instance; its URI.

        :param clients: Nova host names the server admits (with TLS and a
            client name form); added to those of a running server.
        """
        if not isinstance(size_mb, int) or size_mb <= 0:
            raise MemoryServerError('invalid memory server size %r'
                                    % (size_mb,))
        with self._lock:
            server = self._servers.get(instance_uuid)
            if server and self._is_ours(server):
                if server['size_mb'] != size_mb:
                    raise MemoryServerError(
                        'memory server of %s already serves %d MiB, not '
                        '%d MiB' % (instance_uuid, server['size_mb'],
                                    size_mb))
                if server.get('tls', False) != bool(self._tls_x509_dir):
                    raise MemoryServerError(
                        'memory server of %s runs %s TLS, this host is now '
                        'configured %s it' % (
                            instance_uuid,
                            'with' if server.get('tls') else 'without',
                            'with' if self._tls_x509_dir else 'without'))
                self._update_clients(instance_uuid, server, clients)
                return self._uri(server['port'])
            # Checked here, not at start-up: a host that is never a sub
            # host needs no memory server certificates.
            tls_dir = self._tls_x509_dir
            if tls_dir is not None and (',' in tls_dir or
                                        not os.path.isdir(tls_dir)):
                raise MemoryServerError('memory server TLS directory %r is '
                                        'not a directory without commas'
                                        % (tls_dir,))
            port = self._free_port()
            admitted = None
            if self._tls_x509_dir and self._client_dn and clients:
                if ',' in self._state_dir:
                    raise MemoryServerError(
                        'memory server state directory %r has a comma'
                        % (self._state_dir,))
                admitted = sorted(set(clients))
                self._write_authz(instance_uuid, admitted)
            try:
                child = self._spawn(instance_uuid, port, size_mb,
                                    bool(self._tls_x509_dir),
                                    admitted is not None)
            except MemoryServerError:
                if admitted is not None:
                    os.unlink(self._authz_path(instance_uuid))
                self._close_notify(instance_uuid)
                raise
            self._children[instance_uuid] = child
            self._servers[instance_uuid] = {
                'pid': child.pid, 'port': port, 'size_mb': size_mb,
                'tls': bool(self._tls_x509_dir)}
            if admitted is not None:
                self._servers[instance_uuid]['clients'] = admitted
            self._save()
            return self._uri(port)

    def _spawn(self, instance_uuid, port, size_mb, tls, authz):
        """Run the memory server of an instance on PORT until it listens.

        With TLS, it has this host's server certificates; with AUTHZ, it
        admits only the clients its authz-listfile names.
        """
        if tls and not self._tls_x509_dir:
            raise MemoryServerError(
                'memory server of %s ran with TLS, this host is now '
                'configured without it' % instance_uuid)
        log_path = os.path.join(self._state_dir,
                                'memory-server-%s.log' % instance_uuid)
        cmd = [self._binary, '--listen', '%s:%d' % (self._address, port),
               '--max-memory', '%dM' % size_mb]
        if tls:
            cmd += ['--object',
                    'tls-creds-x509,id=tls0,endpoint=server,'
                    'verify-peer=on,dir=%s' % self._tls_x509_dir,
                    '--tls-creds', 'tls0']
            if authz:
                cmd += ['--object',
                        'authz-listfile,id=auth0,filename=%s,refresh=on'
                        % self._authz_path(instance_uuid),
                        '--tls-authz', 'auth0']
        else:
            LOG.warning('Memory server of instance %s runs without TLS: '
                        'any peer that reaches %s:%d can read and change '
                        'its memory (set [puma] memory_server_tls_x509_dir)',
                        instance_uuid, self._address, port)
            cmd += ['--insecure']
        # The server serves this instance alone: a client, whatever its
        # certificate, gets no other VM's namespace on it.
        cmd += ['--vm', instance_uuid]
        env = None
        if self._watchdog_timeout:
            self._open_notify(instance_uuid)
            env = dict(os.environ,
                       NOTIFY_SOCKET=self._notify[instance_uuid].path,
                       WATCHDOG_USEC=str(int(self._watchdog_timeout * 1e6)))
            env.pop('WATCHDOG_PID', None)
        LOG.info('Starting memory server for instance %s: %s',
                 instance_uuid, ' '.join(cmd))
        with open(log_path, 'ab') as log:
            try:
                child = subprocess.Popen(
                    cmd, stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT, start_new_session=True,
                    close_fds=True, env=env)
            except OSError as e:
                raise MemoryServerError('cannot run %s: %s'
                                        % (self._binary, e))
        self._wait_ready(child, port, log_path)
        return child

    def _running(self, instance_uuid, server):
        child = self._children.get(instance_uuid)
        if child is not None:
            # Reaps a child that exited.
            return child.poll() is None
        return self._is_ours(server)

    def check(self):
        """Start again, empty, every memory server that is gone or hung.

        Each on its port, with its size, TLS and admitted clients, so
        that its clients reconnect to it. A hung one (its watchdog
        expired) is killed first. Returns {instance uuid: error} for the
        servers that could not be started; the next check tries them
        again.
        """
        failed = {}
        with self._lock:
            changed = False
            for instance_uuid, server in sorted(self._servers.items()):
                if self._running(instance_uuid, server):
                    heard = (server.get('watchdog'), server.get('counters'))
                    hung = self._hung(instance_uuid, server)
                    changed |= (server.get('watchdog'),
                                server.get('counters')) != heard
                    if not hung:
                        continue
                    LOG.error('Memory server of instance %s (pid %d, port '
                              '%d) is hung: no watchdog notification for '
                              'over %s s; killing it',
                              instance_uuid, server['pid'], server['port'],
                              self._watchdog_timeout)
                    self._kill(server['pid'],
                               self._children.get(instance_uuid), hung=True)
                    server['hangs'] = server.get('hangs', 0) + 1
                    changed = True
                self._children.pop(instance_uuid, None)
                LOG.error('Memory server of instance %s (pid %d, port %d) '
                          'is gone: starting it again, empty; the '
                          'instance copies its pages onto it from its '
                          'mirror, or stays paused without one',
                          instance_uuid, server['pid'], server['port'])
                try:
                    # Else another process's socket would pass for ours.
                    if not self._bindable(server['port']):
                        raise MemoryServerError(
                            'port %s:%d is taken by another process'
                            % (self._address, server['port']))
                    child = self._spawn(instance_uuid, server['port'],
                                        server['size_mb'],
                                        server.get('tls', False),
                                        server.get('clients') is not None)
                except MemoryServerError as e:
                    LOG.error('Memory server of instance %s could not be '
                              'started again: %s', instance_uuid, e)
                    failed[instance_uuid] = str(e)
                    continue
                self._children[instance_uuid] = child
                server['pid'] = child.pid
                # Those of the server that is gone.
                server.pop('counters', None)
                server['restarts'] = server.get('restarts', 0) + 1
                changed = True
            if changed:
                self._save()
        return failed

    @staticmethod
    def _gone(pid, child, timeout):
        """Whether PID (our CHILD, if not None) ended within TIMEOUT s."""
        deadline = time.monotonic() + timeout
        while True:
            if child is not None:
                if child.poll() is not None:
                    return True
            elif not _alive(pid):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def _kill(self, pid, child=None, timeout=5.0, hung=False):
        """End PID: SIGTERM, then SIGKILL after TIMEOUT s.

        HUNG: SIGKILL at once (SIGTERM would wait on its main loop).
        """
        if not hung:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            if self._gone(pid, child, timeout):
                return
            LOG.warning('Memory server pid %d ignored SIGTERM, killing it',
                        pid)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._gone(pid, child, timeout)

    def stop(self, instance_uuid):
        """Stop the memory server of an instance; nothing if none runs."""
        with self._lock:
            server = self._servers.pop(instance_uuid, None)
            child = self._children.pop(instance_uuid, None)
            if server is None:
                return False
            if child is not None or self._is_ours(server):
                LOG.info('Stopping memory server of instance %s (pid %d)',
                         instance_uuid, server['pid'])
                self._kill(server['pid'], child)
            else:
                LOG.warning('Memory server of instance %s (pid %d) is gone',
                            instance_uuid, server['pid'])
            self._save()
            self._close_notify(instance_uuid)
            try:
                os.unlink(self._authz_path(instance_uuid))
            except FileNotFoundError:
                pass
            return True

    def list(self):
        with self._lock:
            return {u: dict(s) for u, s in self._servers.items()}

    def served_mb(self):
        with self._lock:
            return sum(s['size_mb'] for s in self._servers.values())
