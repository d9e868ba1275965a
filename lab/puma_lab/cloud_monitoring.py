# SPDX-License-Identifier: Apache-2.0
"""The lab cloud's monitoring: puma-exporter per compute, one Prometheus.

As an operator deploys it (docs/metrics.md): each compute host runs
``puma-exporter`` against its libvirtd, with the guest agent option on
(cache lending's figures from the guests' module), and the control host
runs Debian's Prometheus with Puma's alert rules, scraping every
exporter each 10 s.  Both are cloud services (``cloud.spawn``): ``lab/
cloud status`` lists them, ``stop``/``start`` work on them, ``down``
ends them.  Tests read the figures back through Prometheus's HTTP API
(:func:`query`), from inside the control host's namespace.
"""

import os
import time

from puma_lab import errors
from puma_lab import nova_compute
from puma_lab import paths
from puma_lab import prometheus

STATE_KEY = 'prometheus'
START_TIMEOUT = 120
# A TCG guest's agent may take seconds to answer while the guest is busy
# (the option's default, 2, is for KVM guests; the lending test's first
# run here missed one scrape with it).  A scrape asks each guest in turn
# and may take the whole interval.
GUEST_AGENT_TIMEOUT = 4
SCRAPE_INTERVAL = '10s'


def start(cloud, hosts):
    """Exporters on HOSTS (lab hosts), Prometheus on the control host."""
    cloud.step('puma-exporter on %s, Prometheus on the control host'
               % ', '.join(h.name for h in hosts))
    env = {'PYTHONPATH': os.path.join(paths.TOP, 'nova_driver')}
    targets = []
    for h in hosts:
        conf = cloud.path('host-%s' % h.name, 'puma-exporter.conf')
        os.makedirs(os.path.dirname(conf), exist_ok=True)
        with open(conf, 'w') as f:
            # nova-compute's memory server state, in the host's own
            # instances folder (which its libvirtd's namespace mounts at
            # the shared instances_path).
            f.write(prometheus.exporter_conf(
                h.addr, h.uri, guest_agent_timeout=GUEST_AGENT_TIMEOUT,
                memory_server_state_dir=cloud.path(
                    'host-%s' % h.name, 'nova', 'instances', 'puma')))
        cloud.spawn('puma-exporter-%s' % h.name,
                    [nova_compute.python(), '-m', 'puma_nova.cmd.exporter',
                     '--config-file', conf], ns=h.ns, env=env)
        targets.append('%s:%d' % (h.addr, prometheus.EXPORTER_PORT))
    d = cloud.path('prometheus')
    os.makedirs(d, exist_ok=True)
    conf = os.path.join(d, 'prometheus.yml')
    with open(conf, 'w') as f:
        f.write(prometheus.prometheus_yml(targets, SCRAPE_INTERVAL))
    addr = cloud.state['control_addr']
    cloud.spawn('prometheus', prometheus.prometheus_argv(
        conf, os.path.join(d, 'data'), addr))
    cloud.state[STATE_KEY] = {
        'url': 'http://%s:%d' % (addr, prometheus.PROMETHEUS_PORT),
        'targets': targets}
    cloud.save()
    wait_targets_up(cloud, len(targets))


def _api(cloud, path, **query):
    return prometheus.api_get(cloud.state[STATE_KEY]['url'],
                              cloud.state['control_ns'], path, **query)


def wait_targets_up(cloud, count, timeout=START_TIMEOUT):
    """Wait until Prometheus answers and scraped COUNT exporters."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            if len(query(cloud, 'up == 1')) == count:
                return
        except errors.LabError as e:
            last = e
        time.sleep(1)
    raise errors.LabError('Prometheus of the lab cloud: not %d exporters up '
                          'within %ds (%s); see its log and the '
                          'puma-exporter-* logs in %s'
                          % (count, timeout, last, cloud.path('log')))


def query(cloud, expr):
    """The instant vector of EXPR: [(labels, value)]."""
    return prometheus.vector(_api(cloud, 'query', query=expr))


def wait_query(cloud, expr, timeout=120):
    """EXPR's vector once it is not empty (a condition holds)."""
    return prometheus.wait_query(lambda e: query(cloud, e), expr, timeout)
