# SPDX-License-Identifier: Apache-2.0
"""puma-exporter and a Prometheus server, run on emulated hosts.

:class:`Exporter` runs ``puma_nova.cmd.exporter`` (the Nova environment's
Python, lab/setup nova) in a host's namespace against that host's
libvirtd.  :class:`Prometheus` runs Debian's ``prometheus`` in another
host's namespace, scraping the exporters every second with Puma's alert
rules (nova_driver/etc/prometheus/puma-alerts.yml), and answers queries
through its HTTP API from inside that namespace.  Both are registered with
the lab, which stops them at teardown.
"""

import json
import os
import shutil
import sys
import time
import urllib.parse

from puma_lab import daemon
from puma_lab import errors
from puma_lab import netns
from puma_lab import nova_compute
from puma_lab import paths

EXPORTER_PORT = 9736
PROMETHEUS_PORT = 9090
RULES = os.path.join(paths.TOP, 'nova_driver', 'etc', 'prometheus',
                     'puma-alerts.yml')


def exporter_conf(addr, libvirt_uri, monitor_details=False,
                  guest_agent_timeout=None, memory_server_state_dir=''):
    """puma-exporter's config file: its /metrics on ADDR.

    With GUEST_AGENT_TIMEOUT (seconds), the guest agent option on; with
    MEMORY_SERVER_STATE_DIR, the memory servers nova-compute runs there.
    """
    text = ('[puma_exporter]\nlisten_address = %s\nport = %d\n'
            'libvirt_uri = %s\nmonitor_details = %s\n'
            'memory_server_state_dir = %s\n'
            % (addr, EXPORTER_PORT, libvirt_uri,
               str(monitor_details).lower(), memory_server_state_dir))
    if guest_agent_timeout:
        text += 'guest_agent = true\nguest_agent_timeout = %d\n' % \
            guest_agent_timeout
    return text


def prometheus_yml(targets, interval='1s'):
    """Prometheus's config: scrape TARGETS each INTERVAL, Puma's rules.

    A scrape may take the whole INTERVAL (Prometheus's scrape timeout).
    """
    return json.dumps({  # JSON is YAML
        'global': {'scrape_interval': interval,
                   'evaluation_interval': interval,
                   'scrape_timeout': interval},
        'rule_files': [RULES],
        'scrape_configs': [{'job_name': 'puma',
                            'static_configs': [{'targets': list(targets)}]}]})


def prometheus_argv(conf, data, addr):
    return ['prometheus', '--config.file', conf, '--storage.tsdb.path', data,
            '--web.listen-address', '%s:%d' % (addr, PROMETHEUS_PORT)]


def api_get(url, ns, path, **query):
    """GET URL/api/v1/PATH?QUERY from inside namespace NS."""
    url = '%s/api/v1/%s' % (url, path)
    if query:
        url += '?' + urllib.parse.urlencode(query)
    out = netns.run(sys.executable, '-c',
                    'import sys, urllib.request; sys.stdout.write('
                    'urllib.request.urlopen(sys.argv[1], timeout=10)'
                    '.read().decode())', url, ns=ns, timeout=30)
    doc = json.loads(out)
    if doc.get('status') != 'success':
        raise errors.LabError('prometheus %s: %s' % (path, doc))
    return doc['data']


def vector(data):
    """An instant query's result as [(labels, value)]."""
    return [(r['metric'], float(r['value'][1])) for r in data['result']]


def wait_query(query, expr, timeout=120):
    """QUERY(EXPR)'s vector once it is not empty (a condition holds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = query(expr)
        if found:
            return found
        time.sleep(1)
    raise AssertionError('prometheus: %s stayed empty for %ds'
                         % (expr, timeout))


def missing():
    """None if the exporter test can run, else why not."""
    if not shutil.which('prometheus'):
        return ('no prometheus binary (Debian package prometheus: '
                'lab/setup deps)')
    return nova_compute.missing()


class _Process(daemon.Daemon):
    """A process in a host's namespace, its output in the lab's logs."""

    def __init__(self, host, name):
        self.host = host
        self.dir = host.lab.path(name)
        super().__init__(name, os.path.join(self.dir, 'output.log'))

    def _start(self, argv, env=None):
        os.makedirs(self.dir, exist_ok=True)
        self.spawn(['ip', 'netns', 'exec', self.host.ns] + argv, env=env)
        self.host.lab.register(self, 'guest')

    def stop(self):
        try:
            self.terminate(30)
        except daemon.Lingered:
            pass  # killed


class Exporter(_Process):
    """puma-exporter of HOST (its libvirtd), on HOST's address."""

    def __init__(self, host, monitor_details=True):
        super().__init__(host, 'exporter-%s' % host.name)
        self.monitor_details = monitor_details
        self.target = '%s:%d' % (host.addr, EXPORTER_PORT)

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        conf = os.path.join(self.dir, 'puma-exporter.conf')
        with open(conf, 'w') as f:
            f.write(exporter_conf(self.host.addr, self.host.uri,
                                  self.monitor_details))
        env = dict(os.environ,
                   PYTHONPATH=os.path.join(paths.TOP, 'nova_driver'))
        self._start([nova_compute.python(), '-m', 'puma_nova.cmd.exporter',
                     '--config-file', conf], env=env)
        self.wait_serving()
        return self

    def wait_serving(self, timeout=60):
        self.wait_ready(lambda: 'metrics of' in self.output(),
                        'serving /metrics', timeout)


class Prometheus(_Process):
    """Prometheus on HOST scraping TARGETS each second, with Puma's rules."""

    def __init__(self, host, targets):
        super().__init__(host, 'prometheus-%s' % host.name)
        self.targets = list(targets)
        self.url = 'http://%s:%d' % (host.addr, PROMETHEUS_PORT)

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        conf = os.path.join(self.dir, 'prometheus.yml')
        with open(conf, 'w') as f:
            f.write(prometheus_yml(self.targets))
        self._start(prometheus_argv(conf, os.path.join(self.dir, 'data'),
                                    self.host.addr))
        return self.wait_ready(self._answers, 'answering its API', 120,
                               poll=1)

    def _answers(self):
        try:
            self.api('status/buildinfo')
        except errors.LabError:
            return False
        return True

    def api(self, path, **query):
        """GET /api/v1/PATH?QUERY from inside the host's namespace."""
        return api_get(self.url, self.host.ns, path, **query)

    def query(self, expr):
        """The instant vector of EXPR: [(labels, value)]."""
        return vector(self.api('query', query=expr))

    def wait_query(self, expr, timeout=120):
        """EXPR's vector once it is not empty (a condition holds)."""
        return wait_query(self.query, expr, timeout)

    def firing(self):
        """Names of the alerts firing now."""
        return sorted(a['labels']['alertname']
                      for a in self.api('alerts')['alerts']
                      if a['state'] == 'firing')

    def wait_firing(self, name, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if name in self.firing():
                return
            time.sleep(1)
        raise AssertionError('alert %s not firing after %ds: %s'
                             % (name, timeout, self.api('alerts')))
