# SPDX-License-Identifier: Apache-2.0
"""Emulated hosts: a network namespace with its own libvirtd.

Each host gets a namespace ``puma-N-NAME`` joined to the lab bridge by a
veth pair, an address on the lab subnet, and a libvirtd from the patched
build running in a private mount namespace where libvirt's config, state,
run, log and cache directories are bind mounts of the host's own
directories.  virsh for the host runs in the same namespaces (nsenter), so
it talks to that host's libvirtd exactly as on a real machine.
"""

import os
import subprocess
import time
import uuid

from puma_lab import errors
from puma_lab import netns
from puma_lab import paths

# Directories libvirt uses under its prefix, and the host's own copy.
# runstatedir is /run/puma-libvirtd (configure_libvirt, lab/lib/stack.sh).
RUN_DIR = '/run/puma-libvirtd/libvirt'
LIBVIRT_DIRS = (('etc', 'etc/libvirt'), ('lib', 'var/lib/libvirt'),
                ('run', RUN_DIR), ('log', 'var/log/libvirt'),
                ('cache', 'var/cache/libvirt'))
# virsh's legacy mode looks in $prefix/var/run: name the daemon's socket.
URI = 'qemu:///system?socket=%s/libvirt-sock' % RUN_DIR
READY_TIMEOUT = 60


class Host:
    """One emulated compute host.

    With ``libvirtd=False`` it is only the namespace and its link: a place
    for QEMU processes or a memory server started directly.
    """

    def __init__(self, lab, name, libvirtd=True, hostname=None, binds=(),
                 standard_state_dir=False):
        self.lab = lab
        # (SOURCE, TARGET) folders bind-mounted in libvirtd's mount
        # namespace too, e.g. the host's own storage on a path every host
        # shares (Nova's instances_path).
        self.binds = list(binds)
        # With HOSTNAME, libvirtd runs in a UTS namespace of its own with
        # that host name (what libvirt, and Nova's node name, report);
        # otherwise it shares the machine's.
        self.hostname = hostname
        self.libvirtd = libvirtd
        # With STANDARD_STATE_DIR, libvirt's state directory is also seen
        # at /var/lib/libvirt, where a distribution's libvirt keeps it and
        # where Nova puts a guest agent's socket
        # (/var/lib/libvirt/qemu/org.qemu.guest_agent.0.NAME.sock) whatever
        # libvirt's prefix: see _standard_state_dir().
        self.standard_state_dir = standard_state_dir
        self.name = name
        self.index = lab.next_index()
        self.ns = '%s-%s' % (lab.ns, name)
        self.addr = lab.host_addr(self.index)
        self.dir = lab.path('host-' + name)
        self.prefix = paths.libvirt_prefix()
        self.uuid = str(uuid.uuid4())
        self.proc = None
        # libvirt's migrate_tls_x509_cert_dir, if set: see tls.py.
        self.tls_dir = None

    @property
    def uri(self):
        """URI other hosts use to reach this host's libvirtd."""
        return 'qemu+tcp://%s/system' % self.addr

    def _write_config(self):
        etc = os.path.join(self.dir, 'etc')
        log = os.path.join(self.prefix, 'var/log/libvirt')
        with open(os.path.join(etc, 'libvirtd.conf'), 'w') as f:
            f.write('listen_tls = 0\nlisten_tcp = 1\n'
                    'listen_addr = "%s"\nauth_tcp = "none"\n'
                    'auth_unix_rw = "none"\nhost_uuid = "%s"\n'
                    'log_outputs = "3:file:%s/libvirtd.log"\n'
                    % (self.addr, self.uuid, log))
        with open(os.path.join(etc, 'qemu.conf'), 'w') as f:
            f.write('user = "root"\ngroup = "root"\n'
                    'dynamic_ownership = 0\nremember_owner = 0\n'
                    'security_driver = "none"\nstdio_handler = "file"\n'
                    'namespaces = [ ]\ncgroup_controllers = [ ]\n'
                    'migration_address = "%s"\nmigration_host = "%s"\n'
                    % (self.addr, self.addr))
            if self.tls_dir:
                f.write('migrate_tls_x509_cert_dir = "%s"\n'
                        'migrate_tls_x509_verify = 1\n' % self.tls_dir)

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        netns.add(self.ns)
        netns.add_veth(self.ns, 'eth0', self.lab.ns, 'v%s' % self.index)
        netns.run('ip', 'link', 'set', 'v%s' % self.index, 'master', 'br0',
                  'up', ns=self.lab.ns)
        netns.set_addr(self.ns, 'eth0', self.addr + '/24')
        self.lab.register(self, 'host')
        if self.libvirtd:
            self._start_libvirtd()
        return self

    def set_link(self, up):
        """Plug or unplug the host's cable (its veth end in the switch)."""
        netns.run('ip', 'link', 'set', 'v%s' % self.index,
                  'up' if up else 'down', ns=self.lab.ns)

    def link_bytes(self):
        """(rx, tx) byte counters of the host's network interface."""
        out = netns.run('cat', '/sys/class/net/eth0/statistics/rx_bytes',
                        '/sys/class/net/eth0/statistics/tx_bytes',
                        ns=self.ns)
        rx, tx = out.split()
        return int(rx), int(tx)

    def _start_libvirtd(self):
        for sub, _target in LIBVIRT_DIRS:
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        self._write_config()
        binds = []
        for sub, target in LIBVIRT_DIRS:
            target = os.path.join(self.prefix, target)
            os.makedirs(target, exist_ok=True)
            binds.append('mount --bind %s %s' % (os.path.join(self.dir, sub),
                                                 target))
        # libvirt finds the emulator for its capabilities in PATH.
        binds.append('export PATH=%s:$PATH'
                     % os.path.dirname(paths.qemu_binary()))
        # The default pid file sits outside var/run/libvirt: keep it in.
        for src, target in self.binds:
            binds.append('mount --bind %s %s' % (src, target))
        if self.standard_state_dir:
            binds += self._standard_state_dir()
        if self.hostname:
            binds.append('hostname %s' % self.hostname)
        script = ' && '.join(['mount --make-rprivate /'] + binds) + \
            ' && exec %s/sbin/libvirtd --listen --pid-file %s/libvirtd.pid' \
            % (self.prefix, RUN_DIR)
        with open(os.path.join(self.dir, 'log', 'stdio.log'), 'w') as log:
            self.proc = subprocess.Popen(
                ['ip', 'netns', 'exec', self.ns, 'unshare', '--mount'] +
                (['--uts'] if self.hostname else []) +
                ['--propagation', 'private', 'sh', '-c', script],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + READY_TIMEOUT
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise errors.LabError('host %s: libvirtd exited with %d; see '
                                      '%s/log' % (self.name,
                                                  self.proc.returncode,
                                                  self.dir))
            try:
                self.virsh('version', timeout=20)
                return
            except errors.LabError as e:
                last = e
                time.sleep(0.5)
        raise errors.LabError('host %s: libvirtd not ready within %ds: %s'
                              % (self.name, READY_TIMEOUT, last))

    def restart_libvirtd(self, timeout=30):
        """Stop this host's libvirtd and start it again; domains run on.

        As on a real host after an upgrade or a crash of the daemon: the
        new libvirtd reconnects to the running QEMUs from the status XML
        in its run directory (see status_xml()).
        """
        self.proc.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._start_libvirtd()

    def status_xml(self, domain):
        """libvirtd's status XML of a running DOMAIN (its private state)."""
        with open(os.path.join(self.dir, 'run', 'qemu',
                               domain + '.xml')) as f:
            return f.read()

    def _standard_state_dir(self):
        """Commands that show libvirt's state directory at /var/lib/libvirt.

        The machine need not have /var/lib/libvirt (the lab's libvirt lives
        in its own prefix) and the lab writes nothing outside its own
        directories: in this host's mount namespace only, /var/lib becomes
        an overlay whose upper layer is the host's folder, the mount point
        /var/lib/libvirt is made there, and the host's libvirt state
        directory is bound onto it.  The machine's /var/lib is unchanged.
        """
        upper = os.path.join(self.dir, 'var-lib', 'upper')
        work = os.path.join(self.dir, 'var-lib', 'work')
        os.makedirs(upper, exist_ok=True)
        os.makedirs(work, exist_ok=True)
        return ['mount -t overlay puma-var-lib -o lowerdir=/var/lib,'
                'upperdir=%s,workdir=%s /var/lib' % (upper, work),
                'mkdir -p /var/lib/libvirt',
                'mount --bind %s /var/lib/libvirt'
                % os.path.join(self.dir, 'lib')]

    def virsh(self, *args, timeout=60, check=True):
        """virsh in this host's namespaces, connected to its libvirtd."""
        if self.proc is None:
            raise errors.LabError('host %s is not started' % self.name)
        return netns.run('nsenter', '-t', str(self.proc.pid), '-m', '-n',
                         os.path.join(self.prefix, 'bin', 'virsh'),
                         '-c', URI, *args, timeout=timeout, check=check)

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        doms = self.virsh('list', '--name', check=False, timeout=20)
        for dom in doms.split():
            self.virsh('destroy', dom, check=False, timeout=30)
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
