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

"""puma-compute-agent: Puma's service on a compute host.

Runs beside nova-compute, with the same configuration files (nova.conf
with its ``[puma]`` section): ``puma-compute-agent --config-file
/etc/nova/nova.conf``.  It serves topic ``puma-compute`` for this host on
Nova's transport (compute.agent says what it does) and reads Nova's
instances through the conductor, as nova-compute does; it never opens
Nova's database.
"""

import os
import sys

# Nova 34 runs its services on native threads when told so; so do we
# (before anything imports oslo.messaging or oslo.service).
os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', 'true')

from puma_nova import threads  # noqa: E402
threads.use_native_threads()

import threading  # noqa: E402

from nova.conductor import rpcapi as conductor_rpcapi  # noqa: E402
import nova.conf  # noqa: E402
from nova import config  # noqa: E402
from nova import objects  # noqa: E402
from nova.objects import base as objects_base  # noqa: E402
from nova import rpc as nova_rpc  # noqa: E402
from nova.virt.libvirt import driver as libvirt_driver  # noqa: E402
from nova.virt.libvirt import host as libvirt_host  # noqa: E402
from oslo_log import log as logging  # noqa: E402
from oslo_service import service as os_service  # noqa: E402

from puma_nova.compute import agent  # noqa: E402
from puma_nova.compute import manager  # noqa: E402
from puma_nova import rpc  # noqa: E402

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)


class AgentWorker(os_service.ServiceBase):
    """The agent as oslo.service runs it, in its worker process.

    oslo.service's launcher (the threading backend, as Nova 34 uses)
    forks the worker, stops it gracefully on SIGTERM or SIGINT, and on
    SIGHUP starts a new worker on the re-read configuration.  What the
    agent keeps survives that: the split plans and the memory servers
    live in files of ``<instances_path>/puma``, and the memory servers
    run in their own sessions.  The lending pairs come again with the
    scheduler's next planning round.  The transport, the libvirt
    connection and the RPC server are made in the worker, after the fork.
    """

    def __init__(self):
        self.agent = None
        self._server = None
        self._libvirt = None
        self._done = threading.Event()

    def start(self):
        nova_rpc.init(CONF)
        objects_base.NovaObject.indirection_api = (
            conductor_rpcapi.ConductorAPI())
        self._libvirt = libvirt_host.Host(libvirt_driver.LibvirtDriver._uri())
        self._libvirt.initialize()
        self.agent = agent.ComputeAgent(CONF.host, self._libvirt,
                                        nova_rpc.TRANSPORT)
        self._server = rpc.get_server(
            nova_rpc.TRANSPORT, rpc.COMPUTE_TOPIC, CONF.host,
            [manager.PumaComputeEndpoint(self.agent)])
        self._server.start()
        self.agent.start()
        LOG.info('puma-compute-agent serving %s for %s', rpc.COMPUTE_TOPIC,
                 CONF.host)

    def wait(self):
        self._done.wait()

    def stop(self):
        if self._server is not None:
            self._server.stop()
            self._server.wait()
            self._server = None
        if self.agent is not None:
            self.agent.stop()
        self._done.set()

    def reset(self):
        """Nothing: a SIGHUP starts a new worker (threading backend)."""


def main(argv=None):
    argv = sys.argv if argv is None else argv
    config.parse_args(argv, configure_db=False, init_rpc=False)
    logging.setup(CONF, 'puma-compute-agent')
    objects.register_all()
    launcher = os_service.launch(CONF, AgentWorker(),
                                 restart_method='mutate')
    return launcher.wait()


if __name__ == '__main__':
    sys.exit(main())
