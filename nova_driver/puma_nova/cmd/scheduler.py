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
"""puma-scheduler: the Puma datacenter scheduler service."""

# Before anything imports oslo.messaging or oslo.service.
from puma_nova import threads
threads.use_native_threads()

import sys  # noqa: E402
import threading  # noqa: E402

from oslo_config import cfg  # noqa: E402
from oslo_log import log as logging  # noqa: E402
from oslo_service import service as os_service  # noqa: E402

from puma_nova.conf import scheduler as sched_conf  # noqa: E402
from puma_nova import rpc  # noqa: E402
from puma_nova.scheduler import service  # noqa: E402

CONF = cfg.CONF
LOG = logging.getLogger(__name__)


class SchedulerWorker(os_service.ServiceBase):
    """The scheduler as oslo.service runs it, in its worker process.

    oslo.service's launcher (the threading backend, as Nova 34 uses)
    forks the worker, stops it gracefully on SIGTERM or SIGINT, and on
    SIGHUP re-reads the configuration files (restart_method 'mutate').
    The transport and the RPC server are made in the worker, after the
    fork.
    """

    def __init__(self):
        self._svc = None
        self._done = threading.Event()

    def start(self):
        self._svc = service.SchedulerService()
        self._svc.start()

    def wait(self):
        self._done.wait()

    def stop(self):
        if self._svc is not None:
            self._svc.stop()
        self._done.set()

    def reset(self):
        """Nothing to do: the worker reads CONF at each planning round.

        (With the threading backend, SIGHUP restarts the worker after the
        master mutated the configuration.)
        """


def main(argv=None):
    sched_conf.register_opts(CONF)
    logging.register_options(CONF)
    rpc.set_defaults()
    CONF(sys.argv[1:] if argv is None else argv, project='puma',
         prog='puma-scheduler')
    logging.setup(CONF, 'puma-scheduler')
    launcher = os_service.launch(CONF, SchedulerWorker(),
                                 restart_method='mutate')
    return launcher.wait()


if __name__ == '__main__':
    sys.exit(main())
