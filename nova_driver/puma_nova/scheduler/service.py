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
"""The puma-scheduler service: an RPC server plus a planning thread.

Threads: oslo.messaging's 'threading' executor runs the RPC calls; one
daemon thread runs the periodic tasks every [puma_scheduler]
planning_interval seconds: a planning round, the expiry of split plans
older than plan_ttl, then the release of the plans whose live migration
Nova failed.  stop() ends both and waits for them.
"""

import threading

from oslo_config import cfg
from oslo_log import log as logging

from puma_nova.api import nova
from puma_nova.compute import rpcapi as compute_rpcapi
from puma_nova import context
from puma_nova import rpc
from puma_nova.scheduler import manager
from puma_nova.scheduler import placement

CONF = cfg.CONF
LOG = logging.getLogger(__name__)


def nova_client():
    """The Nova client of release_failed_migrations, or None if off."""
    if not CONF.puma_scheduler.release_failed_migrations:
        return None
    return nova.SDKNovaClient()


class SchedulerService(object):

    def __init__(self, transport=None):
        self.transport = transport or rpc.get_transport(CONF)
        self.manager = manager.SchedulerManager(
            compute_rpcapi.ComputeAPI(
                self.transport, timeout=CONF.puma_scheduler.rpc_timeout),
            placement=placement.from_conf(), nova=nova_client())
        self.server = rpc.get_server(self.transport, rpc.SCHEDULER_TOPIC,
                                     CONF.puma_scheduler.host,
                                     [self.manager])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._planning_loop,
                                        name='puma-planning', daemon=True)

    def start(self):
        self.server.start()
        self._thread.start()
        LOG.info('puma-scheduler %s serving topic %s',
                 CONF.puma_scheduler.host, rpc.SCHEDULER_TOPIC)

    def _planning_loop(self):
        ctxt = context.get_admin_context()
        while not self._stop.wait(CONF.puma_scheduler.planning_interval):
            self.run_periodic_tasks(ctxt)

    def run_periodic_tasks(self, ctxt):
        """A planning round, then release stale and failed split plans."""
        try:
            self.manager.run_planning_round(ctxt)
        except Exception:
            # One bad round (database away, ...) must not end planning.
            LOG.exception('Planning round failed')
        try:
            self.manager.expire_plans(ctxt)
        except Exception:
            LOG.exception('Expiring stale split plans failed')
        try:
            self.manager.release_failed_plans(ctxt)
        except Exception:
            LOG.exception('Releasing the split plans of failed '
                          'migrations failed')

    def stop(self):
        """Stop serving; a round in progress gets rpc_timeout to finish."""
        self._stop.set()
        self.server.stop()
        self.server.wait()
        self._thread.join(CONF.puma_scheduler.rpc_timeout + 5)
        if self._thread.is_alive():
            LOG.warning('Planning round still waiting for compute hosts; '
                        'exiting without it (the next start pushes again)')
