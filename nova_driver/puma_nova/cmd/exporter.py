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

"""``puma-exporter``: Prometheus metrics of this compute host's VMs.

Serves ``/metrics`` ([puma_exporter] listen_address and port, HTTPS and
client certificates with the tls_* options) from a collector that reads
libvirtd on every scrape (puma_nova.exporter).  It stops on SIGTERM or
SIGINT.
"""

import functools
import signal
import sys
import threading

from oslo_config import cfg
from oslo_log import log as logging
import prometheus_client

from puma_nova.compute import memory_server
from puma_nova.conf import exporter as exporter_conf
from puma_nova.exporter import collector
from puma_nova.exporter import source

CONF = cfg.CONF
LOG = logging.getLogger(__name__)


def serve(conf):
    """Start serving; returns (http server, its thread)."""
    opts = conf.puma_exporter
    if bool(opts.tls_cert_file) != bool(opts.tls_key_file):
        raise SystemExit('puma-exporter: tls_cert_file and tls_key_file '
                         'go together')
    if opts.tls_client_ca_file and not opts.tls_cert_file:
        raise SystemExit('puma-exporter: tls_client_ca_file needs '
                         'tls_cert_file and tls_key_file')
    registry = prometheus_client.CollectorRegistry()
    servers = None
    if opts.memory_server_state_dir:
        servers = functools.partial(memory_server.read_servers,
                                    opts.memory_server_state_dir)
    registry.register(collector.PumaCollector(source.LibvirtSource(
        opts.libvirt_uri, monitor_details=opts.monitor_details,
        guest_agent_timeout=(opts.guest_agent_timeout if opts.guest_agent
                             else None)), memory_servers=servers))
    tls = {}
    if opts.tls_cert_file:
        tls = {'certfile': opts.tls_cert_file, 'keyfile': opts.tls_key_file}
        if opts.tls_client_ca_file:
            tls.update(client_cafile=opts.tls_client_ca_file,
                       client_auth_required=True)
    server, thread = prometheus_client.start_http_server(
        opts.port, opts.listen_address, registry=registry, **tls)
    LOG.info('puma-exporter: metrics of %s on %s://%s:%d/metrics%s',
             opts.libvirt_uri, 'https' if tls else 'http',
             opts.listen_address, opts.port,
             ' (client certificates required)'
             if tls.get('client_auth_required') else '')
    return server, thread


def main(argv=None):
    exporter_conf.register_opts(CONF)
    logging.register_options(CONF)
    CONF(sys.argv[1:] if argv is None else argv, project='puma',
         prog='puma-exporter')
    logging.setup(CONF, 'puma-exporter')
    server, thread = serve(CONF)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *args: stop.set())
    while not stop.wait(1):
        pass
    server.shutdown()
    thread.join()
    LOG.info('puma-exporter stopped')
    return 0


if __name__ == '__main__':
    sys.exit(main())
