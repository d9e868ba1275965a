# SPDX-License-Identifier: Apache-2.0
"""The lab cloud: a small, real OpenStack on the lab's emulated hosts.

``./lab/cloud up`` makes a lab (namespace ``puma-N`` with its bridge) and
in it a control host ``puma-N-ctl`` (no libvirtd) and the compute hosts
a, b and c (each with the patched libvirtd, see :mod:`puma_lab.host`).
On the control host it starts, as real services of OpenStack 2026.2 from
the cloud environment (``lab/setup cloud``): a private MariaDB
(lab/lib/mariadb.sh) and the lab's RabbitMQ (lab/lib/rabbitmq.sh),
Keystone (fernet tokens), Placement, Glance (file store), Nova's API,
conductor and scheduler, Neutron's API server with ML2 and OVN (its
databases and ovn-northd here, Open vSwitch and ovn-controller on each
compute host: :mod:`puma_lab.ovn`); each WSGI service runs under uWSGI.
On every compute host it starts puma-compute-agent (Puma's service of
the host) and nova-compute with the Puma driver (``puma-nova-compute``),
both from the Nova environment of ``lab/setup nova``, against that host's
libvirtd, and puma-exporter,
which Prometheus on the control host scrapes
(:mod:`puma_lab.cloud_monitoring`). It writes ``clouds.yaml`` (clouds
``lab-admin`` and ``lab-demo``) in the cloud's run directory.

The cloud outlives the command: its state is in ``RUNDIR/cloud.json``
(RUNDIR is the lab's ``/run/puma-lab/N``), every process it started is
recorded under ``RUNDIR/pids``. ``down`` stops them and removes the
lab's namespaces (which ends whatever still runs in them: only the
cloud's processes run there) and the run directory.

Addresses are only the lab's: services listen on the control host's lab
address (10.77.0.11) or on its loopback, reachable from the lab's
namespaces only.
"""

import configparser
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from puma_lab import cloud_monitoring
from puma_lab import errors
from puma_lab import horizon
from puma_lab import host as host_mod
from puma_lab import lab as lab_mod
from puma_lab import netns
from puma_lab import nova_compute
from puma_lab import ovn
from puma_lab import paths
from puma_lab import prometheus

# Every account's password: the cloud is reachable from the lab only.
PASSWORD = 'puma-lab'
REGION = 'RegionOne'
CONTROL = 'ctl'
COMPUTES = ('a', 'b', 'c')
# The computes that offer Shoot4U ([puma] shoot4u_allowed); c, the memory
# servers' host, is a host without it, as an operator may keep one.
SHOOT4U_HOSTS = ('a', 'b')
DB_PORT = 3306
AMQP_PORT = 5672
PORTS = {'keystone': 5000, 'placement': 8778, 'glance': 9292,
         'nova': 8774, 'neutron': 9696, 'puma': 9891}
DATABASES = ('keystone', 'placement', 'glance', 'nova_api', 'nova',
             'nova_cell0', 'neutron', 'puma')
# Service catalog: (name, type, description, URL path, service user).
CATALOG = (
    ('keystone', 'identity', 'Keystone', '/v3', None),
    ('placement', 'placement', 'Placement', '', 'placement'),
    ('glance', 'image', 'Glance', '', 'glance'),
    ('nova', 'compute', 'Nova', '/v2.1', 'nova'),
    ('neutron', 'network', 'Neutron', '', 'neutron'),
    ('puma', 'memory-pool', 'Puma memory pool', '', 'puma'),
)
# WSGI applications (module:callable) and how each finds its config.
WSGI = {
    'keystone': ('keystone.wsgi.api:application', 'OS_KEYSTONE_CONFIG_DIR'),
    'placement': ('placement.wsgi.api:application',
                  'OS_PLACEMENT_CONFIG_DIR'),
    'glance': ('glance.wsgi.api:application', 'OS_GLANCE_CONFIG_DIR'),
    'nova': ('nova.wsgi.osapi_compute:application', 'OS_NOVA_CONFIG_DIR'),
    'neutron': ('neutron.wsgi.api:application', 'OS_NEUTRON_CONFIG_DIR'),
    'puma': ('puma_nova.wsgi.api:application', 'OS_PUMA_CONFIG_DIR'),
}
# oslo.privsep contexts of nova-compute (Nova, os-brick, os-vif).
PRIVSEP_SECTIONS = ('nova_sys_admin', 'privsep_osbrick',
                    'vif_plug_ovs_privileged',
                    'vif_plug_linux_bridge_privileged')
HTTP_TIMEOUT = 180
# Seconds a stopped service has to end (nova-compute's graceful shutdown
# takes up to oslo.service's graceful_shutdown_timeout, 60) before SIGKILL.
STOP_TIMEOUT = 90
COMPUTE_TIMEOUT = 300
# Nova 34's services run on native threads (docs/nova-compute.md).
NOVA_ENV = {'OS_NOVA_DISABLE_EVENTLET_PATCHING': 'true'}
PLANNING_INTERVAL = 10
# The cache-lending channel (lending_channel): each compute host's bridge
# and the lab's switch joining them.
LENDING_BRIDGE = 'br-puma'
LENDING_SWITCH = 'brl'
LENDER_MAX_CPU_PERCENT = 15
REPORT_INTERVAL = 10
FREE_RAM_MARGIN_MB = 64
MIN_RESIDENT_RATIO = 0.1


def env_dir():
    return os.path.join(paths.CACHE, 'cloud', 'current')


def venv(*parts):
    return os.path.join(env_dir(), 'venv', *parts)


def missing():
    """None if everything the cloud runs is installed, else why not."""
    if not os.path.exists(os.path.join(env_dir(), 'good')):
        return 'no cloud environment in %s (run lab/setup cloud)' % env_dir()
    why = (nova_compute.missing() or horizon.missing(browser=False) or
           prometheus.missing() or ovn.missing())
    if why:
        return why
    for path, step in (('/usr/sbin/mariadbd', 'deps'),
                       ('/usr/lib/rabbitmq/bin/rabbitmq-server', 'deps'),
                       (os.path.join(paths.libvirt_prefix(), 'sbin',
                                     'libvirtd'), 'stack')):
        if not os.path.exists(path):
            return '%s is missing (run lab/setup %s)' % (path, step)
    return None


def db_user(database):
    """The MariaDB user of DATABASE: one for Nova's three."""
    return 'nova' if database.startswith('nova') else database


def write_ini(path, sections):
    """SECTIONS: {section: {option: value}} as an oslo.config file."""
    conf = configparser.ConfigParser(interpolation=None)
    conf.optionxform = str
    for section, options in sections.items():
        if section != 'DEFAULT':
            conf.add_section(section)
        for opt, value in options.items():
            if isinstance(value, bool):
                value = str(value).lower()
            conf.set(section, opt, str(value))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        conf.write(f)


def uwsgi_ini(name, addr, port, module, config_env, config_dir, log, pid,
              pythonpath=None):
    """uWSGI's config for one WSGI service, as a dict for write_ini.

    One process with a few threads: the lab's 2 cores are shared, and
    Nova 34 and the others are thread-safe under uWSGI. Glance needs
    chunked and raw request bodies for image uploads. PYTHONPATH: where
    the application's package is, if not in the cloud environment (the
    checkout's puma_nova).
    """
    opts = {
        'http-socket': '%s:%d' % (addr, port),
        'module': module,
        'home': venv(),
        'master': True,
        'processes': 1,
        'threads': 4,
        'enable-threads': True,
        'lazy-apps': True,
        'need-app': True,
        'die-on-term': True,
        'buffer-size': 65535,
        # uWSGI's http-socket serves one request a connection: say so, or
        # clients that reuse connections get resets.
        'add-header': 'Connection: close',
        'procname-prefix-spaced': 'puma-cloud-%s' % name,
        'env': '%s=%s' % (config_env, config_dir),
        'logto': log,
        'pidfile': pid,
    }
    if name == 'glance':
        opts.update({'http-chunked-input': True, 'http-raw-body': True,
                     'http-auto-chunked': True, 'socket-timeout': 600})
    if pythonpath:
        opts['pythonpath'] = pythonpath
    return {'uwsgi': opts}


def model_meminfo(real, free_mb):
    """/proc/meminfo text REAL with FREE_MB free and no buffers or cache."""
    out = []
    for line in real.splitlines():
        key = line.split(':')[0]
        if key in ('MemFree', 'MemAvailable'):
            line = '%s:%s%d kB' % (key, ' ' * (15 - len(key)),
                                   free_mb * 1024)
        elif key in ('Buffers', 'Cached'):
            line = '%s:%s0 kB' % (key, ' ' * (15 - len(key)))
        out.append(line)
    return '\n'.join(out) + '\n'


def find():
    """The run directory of the cloud that is up, or None."""
    for state in sorted(glob.glob(os.path.join(paths.RUN, '*',
                                               'cloud.json'))):
        return os.path.dirname(state)
    return None


def load(rundir):
    with open(os.path.join(rundir, 'cloud.json')) as f:
        return json.load(f)


class _RunDir:
    """The run directory of a lab another process brought up."""

    def __init__(self, rundir):
        self.dir = rundir

    def path(self, *parts):
        return os.path.join(self.dir, *parts)


class Cloud:
    """One lab cloud; ``up`` builds it, ``down`` (of any process) ends it."""

    def __init__(self, say=None):
        self.say = say or (lambda msg: print('[puma-cloud] %s' % msg,
                                             file=sys.stderr, flush=True))
        self.lab = None
        self.state = {}
        self.t0 = time.monotonic()

    @classmethod
    def attach(cls, rundir, say=None):
        """The cloud that is up in RUNDIR, to run commands against it."""
        cloud = cls(say)
        cloud.lab = _RunDir(rundir)
        cloud.state = load(rundir)
        return cloud

    # -- helpers -------------------------------------------------------
    def path(self, *parts):
        return self.lab.path(*parts)

    def save(self):
        tmp = self.path('cloud.json.tmp')
        with open(tmp, 'w') as f:
            json.dump(self.state, f, indent=1, sort_keys=True)
        os.replace(tmp, self.path('cloud.json'))

    def step(self, msg):
        self.say('%s (%.0f s)' % (msg, time.monotonic() - self.t0))

    @property
    def addr(self):
        return self.state['control_addr']

    def url(self, service, suffix=''):
        return 'http://%s:%d%s' % (self.addr, PORTS[service], suffix)

    def db(self, name):
        return 'mysql+pymysql://%s:%s@127.0.0.1:%d/%s?charset=utf8mb4' % (
            db_user(name), PASSWORD, DB_PORT, name)

    def transport(self):
        return 'rabbit://guest:guest@%s:%d/' % (self.addr, AMQP_PORT)

    def run(self, argv, ns=None, env=None, timeout=900):
        """Run ARGV to completion in the control namespace (or NS)."""
        ns = ns or self.state['control_ns']
        full = ['ip', 'netns', 'exec', ns] + list(argv)
        p = subprocess.run(full, capture_output=True, text=True,
                           timeout=timeout,
                           env=dict(os.environ, **(env or {})))
        if p.returncode != 0:
            raise errors.LabError('%s failed (%d): %s' % (
                ' '.join(argv), p.returncode,
                (p.stderr or p.stdout).strip()[-3000:]))
        return p.stdout

    def sh(self, script):
        """A lab/lib shell function call in the control namespace."""
        lib = os.path.join(paths.TOP, 'lab', 'lib')
        return self.run(['bash', '-c', '. %s/common.sh; . %s/rabbitmq.sh; '
                         '. %s/mariadb.sh; %s' % (lib, lib, lib, script)])

    def spawn(self, name, argv, ns=None, env=None):
        """Start a long-running service; its PID goes to pids/NAME.

        How it was started is kept in the state, so that ``start(NAME)``
        starts it again after ``stop(NAME)`` (the fault tests).
        """
        ns = ns or self.state['control_ns']
        self.state.setdefault('services', {})[name] = {
            'argv': list(argv), 'ns': ns, 'env': dict(env or {})}
        self.save()
        log = self.path('log', name + '.log')
        with open(log, 'a') as out:
            p = subprocess.Popen(['ip', 'netns', 'exec', ns] + list(argv),
                                 stdin=subprocess.DEVNULL, stdout=out,
                                 stderr=subprocess.STDOUT,
                                 start_new_session=True, cwd=self.lab.dir,
                                 env=dict(os.environ, **(env or {})))
        with open(self.path('pids', name), 'w') as f:
            f.write('%d\n' % p.pid)
        return p

    def pid(self, name):
        """The PID of service NAME (pids/NAME), or None if it is stopped."""
        try:
            with open(self.path('pids', name)) as f:
                pid = int(f.read())
        except FileNotFoundError:
            return None
        return pid if _alive(pid) else None

    def stop(self, name, timeout=STOP_TIMEOUT):
        """Stop service NAME (SIGTERM, SIGKILL after TIMEOUT seconds).

        Returns how it ended: 'terminated', 'killed' or 'not running'.
        """
        pid = self.pid(name)
        how = 'not running'
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            how = 'terminated'
            deadline = time.monotonic() + timeout
            while _alive(pid):
                if time.monotonic() > deadline and how == 'terminated':
                    os.kill(pid, signal.SIGKILL)
                    how = 'killed'
                time.sleep(0.2)
        if os.path.exists(self.path('pids', name)):
            os.unlink(self.path('pids', name))
        self.step('%s stopped (%s)' % (name, how))
        return how

    def start(self, name):
        """Start service NAME again, as ``up`` started it."""
        if self.pid(name) is not None:
            raise errors.LabError('%s runs already' % name)
        svc = self.state['services'][name]
        self.spawn(name, svc['argv'], ns=svc['ns'], env=svc['env'])
        self.step('%s started again' % name)

    def restart_rabbitmq(self):
        """Stop the cloud's RabbitMQ and start it again.

        Its queues are lost: oslo.messaging's clients reconnect and
        declare theirs again.
        """
        self.sh('stop_rabbitmq %s' % self.state['rabbitmq'])
        self.sh('start_rabbitmq %s %d %s' % (self.state['rabbitmq'],
                                             AMQP_PORT, self.addr))
        self.step('RabbitMQ restarted')

    def ops(self, cmd, arg, timeout=600):
        """A puma_lab.cloud_ops command (cloud venv, control namespace)."""
        out = self.run([venv('bin', 'python'), '-m', 'puma_lab.cloud_ops',
                        cmd, json.dumps(arg)],
                       env={'PYTHONPATH': os.path.join(paths.TOP, 'lab'),
                            'OS_CLIENT_CONFIG_FILE':
                                self.path('clouds.yaml')},
                       timeout=timeout)
        return json.loads(out.strip().splitlines()[-1])

    def authtoken(self, user):
        return {'www_authenticate_uri': self.url('keystone'),
                'auth_url': self.url('keystone'),
                'auth_type': 'password', 'project_domain_name': 'Default',
                'user_domain_name': 'Default', 'project_name': 'service',
                'username': user, 'password': PASSWORD,
                'region_name': REGION}

    def wsgi(self, name, pythonpath=None):
        module, config_env = WSGI[name]
        ini = self.path(name, 'uwsgi.ini')
        write_ini(ini, uwsgi_ini(name, self.addr, PORTS[name], module,
                                 config_env, self.path(name),
                                 self.path('log', name + '-api.log'),
                                 self.path(name, 'uwsgi.pid'), pythonpath))
        self.spawn(name + '-api', [venv('bin', 'uwsgi'), '--ini', ini],
                   env=NOVA_ENV if name == 'nova' else None)

    def wait_http(self, name, suffix=''):
        self.ops('wait-http', {'url': self.url(name, suffix),
                               'timeout': HTTP_TIMEOUT},
                 timeout=HTTP_TIMEOUT + 30)

    # -- up ------------------------------------------------------------
    def up(self):
        why = missing()
        if why:
            raise errors.LabError(why)
        if find():
            raise errors.LabError('a lab cloud is already up in %s '
                                  '(./lab/cloud down first)' % find())
        self.lab = lab_mod.Lab('cloud')
        try:
            self._up()
        except BaseException:
            self.say('bringing the cloud up failed; logs in %s/log'
                     % self.lab.dir)
            raise
        self.step('the cloud is up')
        return self.lab.dir

    def _up(self):
        lab = self.lab
        for d in ('log', 'pids'):
            os.makedirs(lab.path(d), exist_ok=True)
        self.state = {'lab_ns': lab.ns, 'num': lab.num, 'dir': lab.dir,
                      'hosts': {}}
        lab.setup()
        self.save()
        self.step('lab %s: control host and compute hosts %s'
                  % (lab.ns, ', '.join(COMPUTES)))
        ctl = host_mod.Host(lab, CONTROL, libvirtd=False).start()
        self.state.update(control_ns=ctl.ns, control_addr=ctl.addr)
        self.save()
        hosts = []
        # Nova expects instances_path to be the same path on every host
        # (a migrated domain keeps its disk paths): each host mounts its
        # own folder there, in libvirtd's mount namespace, which its
        # nova-compute joins.
        os.makedirs(self.path('instances'), exist_ok=True)
        for name in COMPUTES:
            own = self.path('host-%s' % name, 'nova', 'instances')
            os.makedirs(own, exist_ok=True)
            # Nova's node name is libvirt's host name: one per host.
            h = host_mod.Host(lab, name, hostname=name,
                              binds=[(own, self.path('instances'))] +
                              ovn.host_binds(self, name),
                              standard_state_dir=True).start()
            hosts.append(h)
            self.state['hosts'][name] = {'ns': h.ns, 'addr': h.addr,
                                         'libvirtd': h.proc.pid,
                                         'uri': h.uri}
            self.save()
        self.lending_channel(lab, hosts)
        ovn.overlay_network(self, lab, hosts)
        self.step('MariaDB and RabbitMQ on %s' % ctl.addr)
        self.sh('start_mariadb %s %d' % (self.path('mariadb'), DB_PORT))
        self.state['mariadb'] = self.path('mariadb')
        self.save()
        for name in DATABASES:
            self.sh('mariadb_create_db %s %s %s %s' % (
                self.path('mariadb'), name, db_user(name), PASSWORD))
        self.sh('start_rabbitmq %s %d %s' % (self.path('rabbitmq'),
                                             AMQP_PORT, ctl.addr))
        self.state['rabbitmq'] = self.path('rabbitmq')
        self.save()
        self.keystone()
        self.write_clouds_yaml()
        self.step('service users, catalog and demo project')
        self.state['projects'] = self.ops('accounts', {
            'auth': {'auth_url': self.url('keystone', '/v3'),
                     'username': 'admin', 'password': PASSWORD,
                     'project_name': 'admin', 'user_domain_id': 'default',
                     'project_domain_id': 'default',
                     'region_name': REGION},
            'services': [{'name': n, 'type': t, 'description': d,
                          'url': self.url(n, p), 'user': u}
                         for n, t, d, p, u in CATALOG],
            'demo': {'project': 'demo', 'user': 'demo'}})
        self.save()
        self.placement()
        self.glance()
        ovn.start_central(self)
        self.neutron()
        self.nova()
        self.puma()
        horizon.start(self)
        for h in hosts:
            ovn.start_chassis(self, h)
            self.compute(h)
        self.step('waiting for nova-compute on %s' % ', '.join(COMPUTES))
        self.ops('wait-computes', {'cloud': 'lab-admin',
                                   'hosts': list(COMPUTES),
                                   'timeout': COMPUTE_TIMEOUT},
                 timeout=COMPUTE_TIMEOUT + 60)
        self.run([venv('bin', 'nova-manage'), '--config-file',
                  self.path('nova', 'nova.conf'), 'cell_v2',
                  'discover_hosts', '--verbose'], env=NOVA_ENV)
        found = self.ops('hypervisors', {'cloud': 'lab-admin'})
        if sorted(found) != sorted(COMPUTES):
            raise errors.LabError('hypervisors after discover_hosts: %s'
                                  % found)
        ovn.wait_chassis(self, COMPUTES)
        self.step('shared network %s (%s)' % (ovn.NETWORK, ovn.CIDR))
        self.state['network'] = self.ops('network', {
            'cloud': 'lab-admin', 'name': ovn.NETWORK,
            'subnet': ovn.SUBNET, 'cidr': ovn.CIDR})
        self.save()
        cloud_monitoring.start(self, hosts)

    def keystone(self):
        self.step('Keystone')
        conf = self.path('keystone', 'keystone.conf')
        write_ini(conf, {
            'DEFAULT': {'debug': False},
            'database': {'connection': self.db('keystone')},
            'token': {'provider': 'fernet'},
            'fernet_tokens': {'key_repository':
                              self.path('keystone', 'fernet-keys')},
            'credential': {'key_repository':
                           self.path('keystone', 'credential-keys')},
        })
        manage = [venv('bin', 'keystone-manage'), '--config-file', conf]
        self.run(manage + ['db_sync'])
        for what in ('fernet_setup', 'credential_setup'):
            self.run(manage + [what, '--keystone-user', 'root',
                               '--keystone-group', 'root'])
        url = self.url('keystone', '/v3')
        self.run(manage + ['bootstrap', '--bootstrap-password', PASSWORD,
                           '--bootstrap-admin-url', url,
                           '--bootstrap-internal-url', url,
                           '--bootstrap-public-url', url,
                           '--bootstrap-region-id', REGION])
        self.wsgi('keystone')
        self.wait_http('keystone', '/v3')

    def placement(self):
        self.step('Placement')
        conf = self.path('placement', 'placement.conf')
        write_ini(conf, {
            'DEFAULT': {},
            'api': {'auth_strategy': 'keystone'},
            'placement_database': {'connection': self.db('placement')},
            'keystone_authtoken': self.authtoken('placement'),
        })
        self.run([venv('bin', 'placement-manage'), '--config-file', conf,
                  'db', 'sync'])
        self.wsgi('placement')

    def glance(self):
        self.step('Glance (file store)')
        g = self.path('glance')
        os.makedirs(g, exist_ok=True)
        shutil.copy(venv('etc', 'glance', 'glance-api-paste.ini'), g)
        stores = {}
        for store in ('images', 'staging', 'tasks'):
            stores[store] = self.path('glance', store)
            os.makedirs(stores[store], exist_ok=True)
        write_ini(os.path.join(g, 'glance-api.conf'), {
            'DEFAULT': {'enabled_backends': 'file:file',
                        'worker_self_reference_url': self.url('glance')},
            'glance_store': {'default_backend': 'file'},
            'file': {'filesystem_store_datadir': stores['images']},
            'os_glance_staging_store': {'filesystem_store_datadir':
                                        stores['staging']},
            'os_glance_tasks_store': {'filesystem_store_datadir':
                                      stores['tasks']},
            'database': {'connection': self.db('glance')},
            'keystone_authtoken': self.authtoken('glance'),
            'paste_deploy': {'flavor': 'keystone', 'config_file':
                             os.path.join(g, 'glance-api-paste.ini')},
            'oslo_concurrency': {'lock_path': os.path.join(g, 'lock')},
        })
        self.run([venv('bin', 'glance-manage'), '--config-file',
                  os.path.join(g, 'glance-api.conf'), 'db_sync'])
        self.wsgi('glance')

    def neutron(self):
        self.step('Neutron server with ML2')
        n = self.path('neutron')
        os.makedirs(n, exist_ok=True)
        shutil.copy(venv('etc', 'neutron', 'api-paste.ini'), n)
        write_ini(os.path.join(n, 'neutron.conf'), {
            'DEFAULT': {'core_plugin': 'ml2', 'service_plugins': '',
                        'auth_strategy': 'keystone',
                        'transport_url': self.transport(),
                        'api_paste_config': os.path.join(n, 'api-paste.ini'),
                        'notify_nova_on_port_status_changes': True,
                        'notify_nova_on_port_data_changes': True},
            'database': {'connection': self.db('neutron')},
            'keystone_authtoken': self.authtoken('neutron'),
            'nova': dict(self.authtoken('nova'), **{
                'project_name': 'service'}),
            'oslo_concurrency': {'lock_path': os.path.join(n, 'lock')},
        })
        ml2 = os.path.join(n, 'plugins', 'ml2', 'ml2_conf.ini')
        write_ini(ml2, ovn.ml2_conf(self))
        confs = ['--config-file', os.path.join(n, 'neutron.conf'),
                 '--config-file', ml2]
        self.run([venv('bin', 'neutron-db-manage')] + confs +
                 ['upgrade', 'heads'])
        self.wsgi('neutron')
        # Under uWSGI the API server runs no other worker: the OVN
        # driver's maintenance (the NB database's sync, its hash ring)
        # and Neutron's periodic tasks are processes of their own, as
        # devstack starts them.
        for svc in ('neutron-ovn-maintenance-worker',
                    'neutron-periodic-workers'):
            self.spawn(svc, [venv('bin', svc)] + confs)

    def puma_site(self):
        """The checkout's puma_nova, installed for the cloud environment.

        pip installs nova_driver/ (no dependencies: the cloud environment
        has them) into a folder of the run directory, which goes on
        PYTHONPATH for puma-scheduler, puma-api and the openstack client
        (its ``openstack puma`` commands are entry points of the package).
        """
        site = self.path('puma', 'site')
        self.run([venv('bin', 'pip'), 'install', '--no-deps', '-q',
                  '--no-build-isolation',
                  '--target', site, os.path.join(paths.TOP, 'nova_driver')],
                 env={'PBR_VERSION': '0.1.0'}, timeout=600)
        self.state['puma_site'] = site
        self.save()
        return site

    def puma(self):
        """puma-scheduler and puma-api, behind Keystone."""
        self.step('puma-scheduler and puma-api')
        site = self.puma_site()
        conf = self.path('puma', 'puma.conf')
        nova = self.authtoken('puma')
        nova.pop('www_authenticate_uri')
        write_ini(conf, {
            'DEFAULT': {'transport_url': self.transport()},
            'database': {'connection': self.db('puma')},
            # A guest of the lab is 512 MiB: a split may keep little of it
            # on its main host.  What a host keeps back is the computes'
            # [puma] free_ram_margin_mb: a plan that keeps more resident
            # than the main host's driver sees free is refused there.
            'puma_scheduler': {'host': CONTROL,
                               'planning_interval': PLANNING_INTERVAL,
                               'reserve_mb': FREE_RAM_MARGIN_MB,
                               'min_resident_ratio': MIN_RESIDENT_RATIO},
            'puma_api': {'host': self.addr, 'port': PORTS['puma'],
                         'auth_strategy': 'keystone'},
            'keystone_authtoken': self.authtoken('puma'),
            'nova': nova,
            # puma-scheduler writes what a split lends to the sub host's
            # reserved in placement when it plans (the service user has
            # the admin role).
            'placement': nova,
        })
        env = dict(NOVA_ENV, PYTHONPATH=site)
        py = venv('bin', 'python')
        self.run([py, '-m', 'puma_nova.cmd.manage', '--config-file', conf,
                  'db', 'sync'], env=env)
        self.spawn('puma-scheduler', [py, '-m', 'puma_nova.cmd.scheduler',
                                      '--config-file', conf], env=env)
        # puma-api under uWSGI like the other APIs; its WSGI module reads
        # $OS_PUMA_CONFIG_DIR/puma.conf.
        self.wsgi('puma', pythonpath=site)
        self.wait_http('puma', '/v1/hosts')

    def nova_conf(self, **extra):
        """nova.conf sections shared by control and compute services."""
        d = self.path('nova')
        sections = {
            'DEFAULT': {'transport_url': self.transport(),
                        'host': CONTROL, 'my_ip': self.addr,
                        'state_path': d,
                        # libvirt's monitor socket path has the domain
                        # name in it, below the long lab prefix: Nova's
                        # instance-%08x makes it longer than a socket
                        # path may be.
                        'instance_name_template': 'vm-%x'},
            'api': {'auth_strategy': 'keystone'},
            'keystone_authtoken': self.authtoken('nova'),
            'placement': self.authtoken('placement'),
            'neutron': self.authtoken('neutron'),
            'glance': {'region_name': REGION},
            'service_user': dict(self.authtoken('nova'),
                                 send_service_user_token=True),
            'vnc': {'enabled': False},
            'oslo_concurrency': {'lock_path': os.path.join(d, 'lock')},
            'scheduler': {'discover_hosts_in_cells_interval': -1},
        }
        for name in ('placement', 'neutron', 'service_user'):
            sections[name].pop('www_authenticate_uri')
        for section, options in extra.items():
            sections.setdefault(section, {}).update(options)
        return sections

    def nova(self):
        self.step('Nova API, conductor and scheduler; cells v2')
        d = self.path('nova')
        os.makedirs(d, exist_ok=True)
        shutil.copy(venv('etc', 'nova', 'api-paste.ini'), d)
        conf = os.path.join(d, 'nova.conf')
        write_ini(conf, self.nova_conf(
            api_database={'connection': self.db('nova_api')},
            database={'connection': self.db('nova')},
            wsgi={'api_paste_config': os.path.join(d, 'api-paste.ini')},
            # One worker each (Nova's default is one a core).
            conductor={'workers': 1}, scheduler={'workers': 1}))
        manage = [venv('bin', 'nova-manage'), '--config-file', conf]
        self.run(manage + ['api_db', 'sync'], env=NOVA_ENV)
        self.run(manage + ['cell_v2', 'map_cell0', '--database_connection',
                           self.db('nova_cell0')], env=NOVA_ENV)
        cells = self.run(manage + ['cell_v2', 'list_cells'], env=NOVA_ENV)
        if ' cell1 ' not in cells:
            self.run(manage + ['cell_v2', 'create_cell', '--name', 'cell1'],
                     env=NOVA_ENV)
        self.run(manage + ['db', 'sync'], env=NOVA_ENV)
        self.wsgi('nova')
        for svc in ('conductor', 'scheduler'):
            self.spawn('nova-' + svc, [venv('bin', 'nova-' + svc),
                                       '--config-file', conf], env=NOVA_ENV)
        for name in ('placement', 'glance', 'neutron', 'nova'):
            self.wait_http(name)

    def lending_channel(self, lab, hosts):
        """The cache-lending channel: ``br-puma`` on every compute host.

        Puma-enabled servers (flavor ``puma:lending=true``) get an
        interface on their host's ``br-puma`` (the driver's
        ``[puma] lending_bridge``), whose frames nova-compute filters
        with nftables. The hosts' bridges are joined by a switch of
        their own in the lab's namespace (``brl``), apart from the lab
        network that carries the control plane, as a datacenter would
        keep a storage-like network apart.
        """
        self.step('lending channel: br-puma on %s'
                  % ', '.join(h.name for h in hosts))
        netns.add_bridge(lab.ns, LENDING_SWITCH)
        for h in hosts:
            netns.add_bridge(h.ns, LENDING_BRIDGE)
            netns.add_veth(h.ns, 'lend0', lab.ns, 'l%s' % h.index)
            netns.run('ip', 'link', 'set', 'lend0', 'master',
                      LENDING_BRIDGE, 'up', ns=h.ns)
            netns.run('ip', 'link', 'set', 'l%s' % h.index, 'master',
                      LENDING_SWITCH, 'up', ns=lab.ns)

    def compute(self, h):
        """puma-compute-agent, and nova-compute with the Puma driver, on H.

        Both in the Nova environment.
        """
        self.step('puma-compute-agent and nova-compute on %s' % h.name)
        d = self.path('host-%s' % h.name, 'nova')
        conf = os.path.join(d, 'nova-cpu.conf')
        sections = self.nova_conf(
            DEFAULT={'host': h.name, 'my_ip': h.addr, 'state_path': d,
                     'instances_path': self.path('instances'),
                     'compute_driver': 'puma.PumaLibvirtDriver',
                     # Ephemeral disks (the lending test's borrower):
                     # Nova's default for an image without os_type is
                     # vfat, whose mkfs Debian's hosts need not have.
                     'default_ephemeral_format': 'ext4'},
            # Live migrations reach this host by its lab address (Nova
            # would use the host name, which nothing resolves).
            libvirt={'virt_type': 'qemu', 'connection_uri': h.uri,
                     'live_migration_inbound_addr': h.addr},
            oslo_concurrency={'lock_path': os.path.join(d, 'lock')},
            # os-vif plugs ports into this host's br-int through its own
            # ovsdb-server (puma_lab.ovn), not over TCP.
            os_vif_ovs={'ovsdb_connection':
                        'unix:/run/openvswitch/db.sock'},
            # The guest kernel image (aki, a bzImage) starts with a boot
            # sector that Nova's format inspector takes for a bad MBR when
            # the destination of a live migration fetches it ("Safety
            # check mbr ... failed"); the root image is a bare file system.
            workarounds={'disable_deep_image_inspection': True},
            # Statistics to puma-scheduler (on the same broker); what a
            # host keeps for itself before it counts memory as free for a
            # migration (the hosts share the machine: see
            # model_free_memory).
            puma={'report_interval': REPORT_INTERVAL,
                  'memory_server_binary': paths.memory_server(),
                  'free_ram_margin_mb': FREE_RAM_MARGIN_MB,
                  'shoot4u_allowed': h.name in SHOOT4U_HOSTS,
                  'lending_channel_enabled': True,
                  'lending_bridge': LENDING_BRIDGE,
                  # An idle TCG guest uses a few percent of its vCPU.
                  'lender_max_cpu_percent': LENDER_MAX_CPU_PERCENT})
        # nova-compute runs as root: privsep's helpers start directly,
        # not through sudo and nova-rootwrap (which the lab does not have).
        helper = '%s --config-file %s' % (os.path.join(
            nova_compute.nova_env(), 'venv', 'bin', 'privsep-helper'), conf)
        for section in PRIVSEP_SECTIONS:
            sections[section] = {'helper_command': helper}
        write_ini(conf, sections)
        py = os.path.join(nova_compute.nova_env(), 'venv', 'bin', 'python')
        env = dict(NOVA_ENV, PYTHONPATH=os.path.join(
            paths.TOP, 'nova_driver'), PATH='%s:%s' % (
            # qemu-img of the patched QEMU (image handling).
            os.path.dirname(paths.qemu_img()),
            os.environ.get('PATH', '/usr/bin:/bin')))
        # Puma's service of the host (memory servers, statistics, lending
        # pairs, topic puma-compute) first, then nova-compute, both with
        # the same nova.conf, in libvirtd's mount namespace (instances
        # path, modelled /proc/meminfo).
        for name, module in (('puma-compute-agent', 'compute_agent'),
                             ('nova-compute', 'compute')):
            self.spawn('%s-%s' % (name, h.name),
                       ['nsenter', '-t', str(h.proc.pid), '-m', '--', py,
                        '-m', 'puma_nova.cmd.' + module, '--config-file',
                        conf], ns=h.ns, env=env)

    def model_free_memory(self, host, free_mb=None):
        """Make HOST's nova-compute see FREE_MB free (None: the truth).

        The lab's hosts are namespaces of one machine: each sees all of
        its memory free, and no destination is ever too small for a lab
        guest.  This models a small host the way Nova measures one: its
        libvirt driver takes the used memory from /proc/meminfo (MemFree,
        Buffers, Cached), so a file with MemFree = FREE_MB and no buffers
        or cache is bind-mounted over /proc/meminfo in the host's mount
        namespace (libvirtd's, which nova-compute joins).  The figure is
        fixed while the model is on: guests that start there do not
        lower it.
        """
        pid = str(self.state['hosts'][host]['libvirtd'])
        if free_mb is None:
            subprocess.run(['nsenter', '-t', pid, '-m', 'umount',
                            '/proc/meminfo'], check=False)
            return
        path = self.path('host-%s' % host, 'meminfo')
        with open('/proc/meminfo') as f:
            real = f.read()
        with open(path, 'w') as f:
            f.write(model_meminfo(real, free_mb))
        subprocess.run(['nsenter', '-t', pid, '-m', 'mount', '--bind', path,
                        '/proc/meminfo'], check=True)

    def write_clouds_yaml(self):
        lines = ['# Written by ./lab/cloud up: the lab cloud (reachable '
                 'from the lab\'s', '# namespaces, e.g. ./lab/cloud '
                 'openstack --os-cloud lab-admin ...).', 'clouds:']
        for cloud, user, project in (('lab-admin', 'admin', 'admin'),
                                     ('lab-demo', 'demo', 'demo')):
            lines += ['  %s:' % cloud, '    auth:',
                      '      auth_url: %s' % self.url('keystone', '/v3'),
                      '      username: %s' % user,
                      '      password: %s' % PASSWORD,
                      '      project_name: %s' % project,
                      '      user_domain_name: Default',
                      '      project_domain_name: Default',
                      '    region_name: %s' % REGION,
                      '    identity_api_version: 3',
                      '    interface: public']
        with open(self.path('clouds.yaml'), 'w') as f:
            f.write('\n'.join(lines) + '\n')
        self.state['clouds_yaml'] = self.path('clouds.yaml')
        self.save()


def _alive(pid):
    """PID runs (a zombie does not; one of ours is reaped)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def status(rundir=None):
    """Lines describing the cloud that is up (or why there is none)."""
    rundir = rundir or find()
    if rundir is None:
        return ['no lab cloud is up (./lab/cloud up)']
    st = load(rundir)
    out = ['lab cloud in %s, namespaces %s-*' % (rundir, st['lab_ns'])]
    if 'control_ns' in st:
        out.append('control host %s (%s): MariaDB 127.0.0.1:%d, RabbitMQ '
                   '%s:%d' % (st['control_ns'], st['control_addr'],
                              DB_PORT, st['control_addr'], AMQP_PORT))
    for name, h in sorted(st.get('hosts', {}).items()):
        out.append('compute host %s: %s (%s), libvirtd %s' % (
            name, h['ns'], h['addr'], h['uri']))
    pids = os.path.join(rundir, 'pids')
    for name in sorted(os.listdir(pids)) if os.path.isdir(pids) else ():
        with open(os.path.join(pids, name)) as f:
            pid = int(f.read())
        out.append('  %-22s pid %-7d %s' % (
            name, pid, 'running' if _alive(pid) else 'NOT RUNNING'))
    if st.get('horizon'):
        out.append('Horizon: http://%s:%d/ (Admin > Puma > Memory Pool)'
                   % (st['control_addr'], horizon.PORT))
    if st.get('clouds_yaml'):
        out.append('clouds.yaml: %s' % st['clouds_yaml'])
        with open(st['clouds_yaml']) as f:
            out.extend('  ' + line for line in f.read().splitlines())
    return out


def down(rundir=None, say=print, keep_logs=None):
    """Stop the cloud in RUNDIR (the one that is up by default).

    With KEEP_LOGS, the services' logs are copied to a new folder
    cloud-TIME there first (the run directory goes).
    """
    rundir = rundir or find()
    if rundir is None:
        say('no lab cloud is up')
        return
    st = load(rundir)
    if keep_logs and os.path.isdir(os.path.join(rundir, 'log')):
        kept = os.path.join(keep_logs, time.strftime('cloud-%Y%m%d-%H%M%S'))
        shutil.copytree(os.path.join(rundir, 'log'), kept)
        say('the cloud\'s logs are in %s' % kept)
    if st.get('horizon'):
        # Puma's panel out of the Horizon environment (cleanup_puma).
        try:
            horizon.devstack('cleanup_puma', Cloud.attach(rundir, say=say))
        except errors.LabError as e:
            say('Horizon\'s panel links not removed: %s' % e)
    pids = os.path.join(rundir, 'pids')
    for name in sorted(os.listdir(pids)) if os.path.isdir(pids) else ():
        with open(os.path.join(pids, name)) as f:
            pid = int(f.read())
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    lib = os.path.join(paths.TOP, 'lab', 'lib')
    for key, fn in (('rabbitmq', 'stop_rabbitmq'),
                    ('mariadb', 'stop_mariadb')):
        if st.get(key):
            subprocess.run(['bash', '-c', '. %s/common.sh; . %s/%s.sh; %s %s'
                            % (lib, lib, key, fn, st[key])], check=False)
    # What still runs in the cloud's namespaces (QEMU, libvirtd, uWSGI
    # workers) was started by the cloud; deleting them ends it.
    for ns in netns.names():
        if ns == st['lab_ns'] or ns.startswith(st['lab_ns'] + '-'):
            netns.delete(ns)
    shutil.rmtree(rundir, ignore_errors=True)
    say('lab cloud in %s is down' % rundir)


def main(argv):
    cmd = argv[1] if len(argv) > 1 else 'status'
    try:
        if cmd == 'up':
            Cloud().up()
            print('\n'.join(status()))
        elif cmd == 'down':
            down()
        elif cmd == 'status':
            print('\n'.join(status()))
            return 0 if find() else 3
        elif cmd == 'tempest':
            # Puma's tempest plugin against the cloud that is up.
            from puma_lab import tempest
            rundir = find()
            if rundir is None:
                raise errors.LabError('no lab cloud is up (./lab/cloud up)')
            result = tempest.run(Cloud.attach(rundir), PASSWORD, REGION,
                                 *argv[2:3])
            print(result['out'])
            return 1 if result['failed'] else 0
        elif cmd == 'env':
            # For lab/cloud's "openstack" command: namespace and config.
            rundir = find()
            if rundir is None:
                raise errors.LabError('no lab cloud is up (./lab/cloud up)')
            st = load(rundir)
            print('%s %s %s %s' % (st['control_ns'], st['clouds_yaml'],
                                   venv('bin'), st['puma_site']))
        else:
            print('usage: lab/cloud up|down|status|tempest [REGEX]|'
                  'openstack ARGS...',
                  file=sys.stderr)
            return 2
    except errors.LabError as e:
        print('[puma-cloud] ERROR: %s' % e, file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
