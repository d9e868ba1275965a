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

"""The ``[puma_exporter]`` options of puma-exporter (a compute node)."""

from oslo_config import cfg

GROUP = cfg.OptGroup(
    'puma_exporter',
    title='Puma Prometheus exporter options',
    help="""
puma-exporter serves Prometheus metrics of this compute host's VMs: split
migration (memory here, on memory servers, unused; page-ins and
page-outs; pager and memory-server state), Shoot4U hypercalls, running
migrations, the memory servers this host runs for split instances of
other hosts and, with guest_agent, cache lending.  It runs beside
nova-compute, as its own process.
""")

OPTS = [
    cfg.HostAddressOpt(
        'listen_address', default='127.0.0.1',
        help='Address /metrics is served on.  Use the management '
             'network\'s address of the host for a Prometheus server '
             'elsewhere: the metrics name the VMs (libvirt names, '
             'instance UUIDs).'),
    cfg.PortOpt('port', default=9736, help='Port /metrics is served on.'),
    cfg.StrOpt('libvirt_uri', default='qemu:///system',
               help='libvirtd to read the VMs from (read-only use).'),
    cfg.BoolOpt(
        'monitor_details', default=False,
        help='Also ask QEMU, through libvirt\'s qemu-monitor-command, for '
             'what libvirt does not report: the fault-latency histogram '
             'and memory-server state of split VMs, Shoot4U hypercalls of '
             'TCG vCPUs.  libvirt then logs the domains as tainted '
             '(custom-monitor).'),
    cfg.BoolOpt(
        'guest_agent', default=False,
        help='Also read the Puma guest module\'s counters (cache lending: '
             'puts, gets, hits, pages lent and hosted, round trip) through '
             'the guest agent of each VM whose agent is connected, as '
             'nova-compute does for its reports.  One agent request per VM '
             'and scrape; a guest agent that does not answer delays the '
             'scrape by guest_agent_timeout.'),
    cfg.IntOpt('guest_agent_timeout', default=2, min=1,
               help='Seconds a guest agent may take to answer a request of '
                    'the exporter.'),
    cfg.StrOpt(
        'memory_server_state_dir', default='/var/lib/nova/instances/puma',
        help='Where nova-compute keeps the state of the memory servers it '
             'runs on this host (the puma folder of Nova\'s '
             'instances_path). Their up state, size, resident memory and '
             'restarts are exported from it; nothing while it has no '
             'state file. Empty: not exported.'),
    cfg.StrOpt('tls_cert_file',
               help='Serve /metrics over HTTPS with this certificate (PEM; '
                    'with tls_key_file).'),
    cfg.StrOpt('tls_key_file', help='The key of tls_cert_file (PEM).'),
    cfg.StrOpt('tls_client_ca_file',
               help='With HTTPS: answer only clients (Prometheus servers) '
                    'whose certificate this CA (PEM) signed.'),
]


def register_opts(conf):
    conf.register_group(GROUP)
    conf.register_opts(OPTS, group=GROUP)


def list_opts():
    return [(GROUP, OPTS)]
