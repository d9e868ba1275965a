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

import signal  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402

from oslo_config import cfg  # noqa: E402
from oslo_log import log as logging  # noqa: E402

from puma_nova.conf import scheduler as sched_conf  # noqa: E402
from puma_nova.scheduler import service  # noqa: E402

CONF = cfg.CONF
LOG = logging.getLogger(__name__)


def main(argv=None):
    sched_conf.register_opts(CONF)
    logging.register_options(CONF)
    CONF(sys.argv[1:] if argv is None else argv, project='puma',
         prog='puma-scheduler')
    logging.setup(CONF, 'puma-scheduler')
    svc = service.SchedulerService()
    done = threading.Event()

    def _on_signal(signum, frame):
        LOG.info('Signal %d: stopping', signum)
        done.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    svc.start()
    while not done.wait(1):
        pass
    svc.stop()
    return 0
