# SPDX-License-Identifier: Apache-2.0
"""What the OpenStack control plane costs Puma, in the lab cloud.

``./lab/bench cloud [--runs N] [--pairs N] [--requests N] [--attach]``
brings the lab cloud up (:mod:`puma_lab.cloud`, as ``./lab/cloud up``;
with ``--attach`` it uses the cloud that is up and leaves it up) and
measures, in one run:

1. ``control_overhead_x``: a split migration of a 512 MiB server of the
   split flavor from host a to host b (b modelled small, the memory server
   on c), requested with ``openstack server migrate --live-migration
   --host b`` and timed from the start of that command until Nova's own
   record of the migration (its cell database, polled every 0.2 s) says
   completed, against the same split migration driven directly through
   virsh: a copy of the server's domain (the XML Nova made, its files
   copied) booted on a, a memory server started on c with the argv
   Nova's driver used, and ``virsh migrate`` with the flags Nova's
   driver logged and the same resident limit, timed from the start of the
   memory server until virsh returns.  Both run with a checksummed
   working set inside, which must go on verifying after each move.  The
   runs alternate (API, virsh, API, ...); between runs each guest moves
   back to a whole (not timed).  ``libvirt_ms`` is libvirt's own elapsed
   time of each migration job (``domjobinfo --completed`` on b).
   ``api_phases_s`` splits each API run at the marks of Nova's logs
   (:mod:`puma_lab.benches.cloud_phases`): client, Nova API, until
   libvirt is called, libvirt's call, post-migration, status.
   ``puma_api_overhead_x``: the same split asked with puma-api's ``POST
   /v1/split-migrations`` by a client authenticated beforehand (as
   Horizon or an orchestrator asks), timed from the POST to Nova's
   ``completed``, against the same virsh runs.
2. ``api_list_p99_ms``: puma-api's ``GET /v1/pairs`` with ``--pairs``
   lending pairs in its database (added for the measurement, removed
   after it), ``--requests`` requests one after the other with a Keystone
   token, as ``openstack puma pair list`` makes them.
3. ``control_plane_pss_mb``: the memory of every process of the control
   host (its network namespace: MariaDB, RabbitMQ, Keystone, Placement,
   Glance, Neutron's server, Nova's API, conductor and scheduler,
   puma-scheduler, puma-api, Horizon), PSS summed (RSS beside it), and
   the same for the three nova-compute agents with the Puma driver.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid as uuid_mod
import xml.etree.ElementTree as ET

from puma_lab.benches import cloud_phases
from puma_lab.benches.puma import spread
from puma_lab import cloud as cloud_mod
from puma_lab import cloud_checks as cc
from puma_lab import errors
from puma_lab import paths

SERVER = 'bench-api'
COPY = 'bench-virsh'
MIGRATION_TIMEOUT = 900
# Nova's driver logs the flags it gives libvirt for a split migration.
FLAGS_LOG = re.compile(r'Split migration of (\S+): libvirt migration '
                       r'flags (0x[0-9a-f]+)')
# virsh migrate's option for each libvirt migration flag Nova may set.
VIRSH_FLAGS = ((0x1, '--live'), (0x2, '--p2p'), (0x8, '--persistent'),
               (0x10, '--undefinesource'), (0x40, '--copy-storage-all'),
               (0x80, '--copy-storage-inc'), (0x200, '--compressed'),
               (0x2000, '--auto-converge'), (0x200000, '--split'))


def say(msg):
    print('[bench cloud] %s' % msg, file=sys.stderr, flush=True)


def probe(cloud, cmd, arg, timeout=MIGRATION_TIMEOUT + 60):
    """A puma_lab.cloud_probe command in the control namespace."""
    out = cloud.run([cloud_mod.venv('bin', 'python'), '-m',
                     'puma_lab.cloud_probe', cmd, json.dumps(arg)],
                    env={'PYTHONPATH': os.path.join(paths.TOP, 'lab'),
                         'OS_CLIENT_CONFIG_FILE': cloud.path('clouds.yaml')},
                    timeout=timeout)
    return json.loads(out.strip().splitlines()[-1])


def virsh_flags(flags):
    """virsh migrate options for libvirt migration FLAGS (all of them)."""
    opts = [opt for bit, opt in VIRSH_FLAGS if flags & bit]
    left = flags & ~sum(bit for bit, _ in VIRSH_FLAGS)
    if left:
        raise errors.LabError('no virsh option for migration flags %#x'
                              % left)
    return opts


def nova_flags(cloud, domain):
    """The flags of Nova's last split migration of DOMAIN (its log)."""
    with open(cloud.path('log', 'nova-compute-a.log'), errors='replace') as f:
        found = [int(m.group(2), 16) for m in FLAGS_LOG.finditer(f.read())
                 if m.group(1) == domain]
    if not found:
        raise errors.LabError('nova-compute-a logged no split migration '
                              'flags for %s' % domain)
    return found[-1]


def job_ms(cloud, host, domain):
    """libvirt's elapsed time of DOMAIN's last migration job, on HOST."""
    out = cc.virsh(cloud, host, 'domjobinfo', '--completed', domain)
    m = re.search(r'^Time elapsed:\s+(\d+)\s+ms', out, re.M)
    return int(m.group(1)) if m else None


def memory_server_argv(pid):
    with open('/proc/%d/cmdline' % pid, 'rb') as f:
        return [a.decode() for a in f.read().split(b'\0') if a]


def rounds_in(path, after):
    """Rounds the working set verified per the console log PATH, if > AFTER.

    A working set that ended (a page came back wrong) fails the bench.
    """
    try:
        with open(path, errors='replace') as f:
            log = f.read()
    except FileNotFoundError:
        return None
    if 'puma-guest: workset ended' in log:
        raise errors.LabError('the working set of %s ended: %s'
                              % (path, log[-1000:]))
    lines = cc.workset_lines(log)
    if not lines:
        return None
    state = dict(kv.split('=', 1) for kv in lines[-1].split())
    if state['state'] != 'running':
        raise errors.LabError('working set in %s: %s' % (path, lines[-1]))
    n = int(state['rounds'])
    return n if n > after else None


def wait_rounds(path, after, timeout=cc.SERVER_TIMEOUT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        n = rounds_in(path, after)
        if n is not None:
            return n
        time.sleep(2)
    raise errors.LabError('no working-set round after %d in %s within %ds'
                          % (after, path, timeout))


class VirshCopy:
    """The Nova server's domain, copied and driven with virsh only."""

    def __init__(self, cloud, uuid, domain):
        self.cloud = cloud
        self.uuid = uuid
        self.domain = domain
        self.host = 'a'
        self.memsrv = None
        self.rounds = -1

    def dir(self, host):
        """The copy's folder on HOST, as the bench sees it."""
        return self.cloud.path('host-%s' % host, 'nova', 'instances', COPY)

    def console(self):
        return os.path.join(self.dir(self.host), 'console.log')

    def create(self):
        """Define and start the copy on a, from the server's domain."""
        src = self.cloud.path('host-a', 'nova', 'instances', self.uuid)
        xml = cc.virsh(self.cloud, 'a', 'dumpxml', '--inactive', self.domain)
        root = ET.fromstring(xml)
        root.find('name').text = COPY
        el = root.find('metadata')
        if el is not None:
            root.remove(el)
        # A UUID of its own, in SMBIOS too (libvirt takes the domain's
        # UUID from there when it has none, and requires both to match).
        new = str(uuid_mod.uuid4())
        root.find('uuid').text = new
        for entry in root.iter('entry'):
            if entry.get('name') == 'uuid':
                entry.text = new
        text = ET.tostring(root, encoding='unicode').replace(
            '/instances/%s/' % self.uuid, '/instances/%s/' % COPY)
        # The destination has the files Nova's pre_live_migration would
        # make there (the disk's backing file is in b's image cache).
        for host in ('a', 'b'):
            shutil.rmtree(self.dir(host), ignore_errors=True)
            shutil.copytree(src, self.dir(host))
            open(os.path.join(self.dir(host), 'console.log'), 'w').close()
        path = self.cloud.path('%s.xml' % COPY)
        with open(path, 'w') as f:
            f.write(text)
        self.disks = [d.find('target').get('dev') for d in
                      root.findall('./devices/disk')
                      if d.get('device') == 'disk' and
                      d.find('readonly') is None]
        cc.virsh(self.cloud, 'a', 'define', path)
        cc.virsh(self.cloud, 'a', 'start', COPY)
        self.rounds = wait_rounds(self.console(), -1)

    def start_memory_server(self, argv):
        """The memory server on c, as Nova's driver started one (ARGV)."""
        argv = list(argv)
        i = argv.index('--listen')
        addr, port = argv[i + 1].rsplit(':', 1)
        argv[i + 1] = '%s:%d' % (addr, int(port) + 100)
        ns = self.cloud.state['hosts']['c']['ns']
        log = self.cloud.path('log', 'bench-memory-server.log')
        with open(log, 'a') as out:
            self.memsrv = subprocess.Popen(
                ['ip', 'netns', 'exec', ns] + argv, stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open(log, errors='replace') as f:
                if 'listening on %s:%d' % (addr, int(port) + 100) in f.read():
                    return 'tcp:%s:%d' % (addr, int(port) + 100)
            if self.memsrv.poll() is not None:
                break
            time.sleep(0.05)
        raise errors.LabError('the bench\'s memory server did not start: '
                              'see %s' % log)

    def stop_memory_server(self):
        if self.memsrv and self.memsrv.poll() is None:
            self.memsrv.kill()
            self.memsrv.wait()
        self.memsrv = None

    def migrate(self, dest, opts):
        h = self.cloud.state['hosts'][dest]
        cc.virsh(self.cloud, self.host, 'migrate', *opts, '--migrateuri',
                 'tcp://%s' % h['addr'], *sum((['--migrate-disks', d]
                                               for d in self.disks), []),
                 COPY, h['uri'])
        self.host = dest

    def split(self, flags, argv, limit):
        """The timed split a -> b: memory server, then virsh migrate."""
        t0 = time.monotonic()
        uri = self.start_memory_server(argv)
        self.migrate('b', virsh_flags(flags) + [
            '--split-sub-host-uri', uri, '--split-main-limit', str(limit)])
        took = time.monotonic() - t0
        self.rounds = wait_rounds(self.console(), self.rounds)
        return took

    def back(self, flags):
        """Whole to a again (b's QEMU pages everything in first)."""
        self.migrate('a', virsh_flags(flags & ~0x200000))
        self.stop_memory_server()
        self.rounds = wait_rounds(self.console(), self.rounds)

    def remove(self):
        self.stop_memory_server()
        for host in ('a', 'b'):
            if COPY in cc.domains(self.cloud, host):
                cc.virsh(self.cloud, host, 'destroy', COPY)
            try:
                cc.virsh(self.cloud, host, 'undefine', COPY)
            except errors.LabError:
                pass
            shutil.rmtree(self.dir(host), ignore_errors=True)


def api_split(cloud, uuid):
    """One split a -> b through the API: seconds, and what it used."""
    out = probe(cloud, 'migrate-timed', {
        'osc': [cloud_mod.venv('bin', 'openstack'), '--os-cloud',
                'lab-admin'],
        'server': uuid, 'host': 'b', 'db': cloud.db('nova'),
        'timeout': MIGRATION_TIMEOUT})
    if out['status'] != 'completed':
        raise errors.LabError('split migration through the API: %s' % out)
    entries = [e for e in cc.puma_list(cloud, 'ledger', server=uuid)
               if e['state'] in ('running', 'done')]
    return out, entries[-1]


def puma_api_split(cloud, uuid):
    """The same split asked through puma-api by a long-lived client."""
    out = probe(cloud, 'split-timed', {
        'cloud': 'lab-admin', 'server': uuid, 'host': 'b',
        'db': cloud.db('nova'), 'timeout': MIGRATION_TIMEOUT})
    if out['status'] != 'completed' or out['state'] != 'planned':
        raise errors.LabError('split migration through puma-api: %s' % out)
    return out


def migrations(cloud, runs):
    """Alternating API and virsh splits of the same server."""
    uuid, domain, rounds = cc.split_server(cloud, SERVER)
    cc.model_small(cloud, 'b')
    copy = VirshCopy(cloud, uuid, domain)
    res = {'api_s': [], 'api_cli_s': [], 'api_libvirt_ms': [],
           'virsh_s': [], 'virsh_libvirt_ms': [],
           'puma_api_s': [], 'puma_api_post_s': [],
           'api_phases': {p: [] for p in cloud_phases.PHASES}}
    try:
        for i in range(runs):
            say('run %d/%d: split through the API' % (i + 1, runs))
            out, entry = api_split(cloud, uuid)
            res['api_s'].append(out['total_s'])
            res['api_cli_s'].append(out['cli_s'])
            res['api_libvirt_ms'].append(job_ms(cloud, 'b', domain))
            found = cloud_phases.marks(cloud.path('log'), uuid, 'a',
                                       out['start_wall'], out['end_wall'])
            for name, secs in cloud_phases.phases(
                    found, out['start_wall'], out['end_wall']).items():
                res['api_phases'][name].append(secs)
            limit = entry['main_limit_mb'] << 20
            argv = memory_server_argv(cc.memory_server_pid(uuid))
            flags = nova_flags(cloud, domain)
            rounds = cc.verified(cloud, uuid, after=rounds)
            say('API: %.1f s (CLI %.1f s); limit %d MiB, flags %#x'
                % (out['total_s'], out['cli_s'], entry['main_limit_mb'],
                   flags))
            cc.migrate(cloud, uuid, 'a')
            cc.released(cloud, uuid)
            rounds = cc.verified(cloud, uuid, after=rounds)

            say('run %d/%d: split through puma-api' % (i + 1, runs))
            out = puma_api_split(cloud, uuid)
            res['puma_api_s'].append(out['total_s'])
            res['puma_api_post_s'].append(out['post_s'])
            rounds = cc.verified(cloud, uuid, after=rounds)
            say('puma-api: %.1f s (POST %.1f s)' % (out['total_s'],
                                                    out['post_s']))
            cc.migrate(cloud, uuid, 'a')
            cc.released(cloud, uuid)
            rounds = cc.verified(cloud, uuid, after=rounds)

            if i == 0:
                copy.create()
            say('run %d/%d: the same split through virsh' % (i + 1, runs))
            res['virsh_s'].append(round(copy.split(flags, argv, limit), 3))
            res['virsh_libvirt_ms'].append(job_ms(cloud, 'b', COPY))
            say('virsh: %.1f s' % res['virsh_s'][-1])
            copy.back(flags)
        res['flags'] = '%#x' % flags
        res['main_limit_mb'] = limit >> 20
        res['memory_server_argv'] = argv
    finally:
        copy.remove()
        cloud.model_free_memory('b')
        cc.osc(cloud, 'server', 'delete', '--wait', uuid, fmt=False)
    return res


def list_latency(cloud, pairs, requests):
    """puma-api's pair list with PAIRS pairs in its database.

    puma-scheduler is stopped meanwhile: its next lending round would
    revoke pairs of servers that do not exist.
    """
    cloud.stop('puma-scheduler')
    try:
        added = probe(cloud, 'pairs', {'db': cloud.db('puma'), 'add': pairs})
        try:
            out = probe(cloud, 'get-latency', {
                'cloud': 'lab-admin', 'path': '/v1/pairs', 'n': requests})
        finally:
            probe(cloud, 'pairs', {'db': cloud.db('puma'), 'remove': True})
    finally:
        cloud.start('puma-scheduler')
    if out['items'] < min(pairs, 1000):
        raise errors.LabError('puma-api listed %d pairs with %s in its '
                              'database' % (out['items'], added))
    ms = sorted(out['ms'])
    return {'api_list_items': out['items'], 'api_list_requests': requests,
            'api_list_p50_ms': round(ms[(len(ms) - 1) // 2], 1),
            'api_list_p99_ms': round(ms[(len(ms) - 1) * 99 // 100], 1),
            'api_list_max_ms': max(ms)}


def _netns_inode(ns):
    return os.stat('/run/netns/%s' % ns).st_ino


def _mem_kb(pid):
    """(PSS, RSS) of PID in KiB, or None if it is gone."""
    try:
        with open('/proc/%s/smaps_rollup' % pid) as f:
            text = f.read()
    except OSError:
        return None
    get = (lambda key: int(re.search(r'^%s:\s+(\d+) kB' % key, text,
                                     re.M).group(1)))
    return get('Pss'), get('Rss')


def memory(cloud):
    """PSS and RSS (MiB) of the control host and of the compute agents."""
    ctl = _netns_inode(cloud.state['control_ns'])
    pss = rss = agents_pss = agents_rss = 0
    procs = 0
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            net = os.stat('/proc/%s/ns/net' % pid).st_ino
            with open('/proc/%s/cmdline' % pid, 'rb') as f:
                cmd = f.read()
        except OSError:
            continue
        kb = _mem_kb(pid)
        if kb is None:
            continue
        if net == ctl:
            pss += kb[0]
            rss += kb[1]
            procs += 1
        elif b'puma_nova.cmd.compute' in cmd:
            agents_pss += kb[0]
            agents_rss += kb[1]
    return {'control_plane_pss_mb': round(pss / 1024, 1),
            'control_plane_rss_mb': round(rss / 1024, 1),
            'control_plane_processes': procs,
            'compute_agents_pss_mb': round(agents_pss / 1024, 1),
            'compute_agents_rss_mb': round(agents_rss / 1024, 1)}


def run(argv):
    ap = argparse.ArgumentParser(prog='lab/bench cloud')
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--pairs', type=int, default=1000)
    ap.add_argument('--requests', type=int, default=200)
    ap.add_argument('--attach', action='store_true',
                    help='use the cloud that is up (./lab/cloud up) and '
                    'leave it up')
    args = ap.parse_args(argv)
    why = cloud_mod.missing()
    if why:
        raise errors.LabError(why)
    if args.attach:
        rundir = cloud_mod.find()
        if not rundir:
            raise errors.LabError('no lab cloud is up (./lab/cloud up)')
        cloud = cloud_mod.Cloud.attach(rundir, say=say)
    else:
        cloud = cloud_mod.Cloud(say=say)
    t0 = time.monotonic()
    try:
        if not args.attach:
            cloud.up()
        up_s = round(time.monotonic() - t0, 1)
        mem = memory(cloud)
        say('control plane: %s' % mem)
        mig = migrations(cloud, args.runs)
        lat = list_latency(cloud, args.pairs, args.requests)
        say('puma-api: %s' % lat)
    finally:
        if not args.attach and cloud.lab is not None:
            cloud_mod.down(cloud.lab.dir, say=say,
                           keep_logs=os.environ.get('PUMA_LOGS'))
    api, virsh = spread(mig['api_s']), spread(mig['virsh_s'])
    out = {'runs': args.runs, 'cloud_up_s': None if args.attach else up_s,
           'api_split_s': api, 'api_cli_s': spread(mig['api_cli_s']),
           'api_libvirt_ms': spread(mig['api_libvirt_ms']),
           'virsh_split_s': virsh,
           'virsh_libvirt_ms': spread(mig['virsh_libvirt_ms']),
           # Where the API path's time goes (Nova's logs, cloud_phases).
           'api_phases_s': {name: spread(values) for name, values in
                            mig['api_phases'].items()},
           'control_overhead_x': round(api['median'] / virsh['median'], 2),
           'control_overhead_s': round(api['median'] - virsh['median'], 1),
           # The same split through puma-api, its client authenticated
           # beforehand (no client start, no Keystone round in the time).
           'puma_api_split_s': spread(mig['puma_api_s']),
           'puma_api_post_s': spread(mig['puma_api_post_s']),
           'puma_api_overhead_x': round(
               spread(mig['puma_api_s'])['median'] / virsh['median'], 2),
           'flags': mig['flags'], 'main_limit_mb': mig['main_limit_mb'],
           'memory_server_argv': mig['memory_server_argv'],
           'pairs': args.pairs}
    out.update(lat)
    out.update(mem)
    return out
