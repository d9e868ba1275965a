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
"""puma-api: serve the REST API standalone (development, devstack).

Production deployments run puma_nova.api.app:init_application under a
WSGI server (the puma-api-wsgi script).
"""

# Before anything imports oslo.messaging or oslo.service.
from puma_nova import threads
threads.use_native_threads()

import socketserver  # noqa: E402
import sys  # noqa: E402
from wsgiref import simple_server  # noqa: E402

from oslo_config import cfg  # noqa: E402

from puma_nova.api import app  # noqa: E402

CONF = cfg.CONF


class _ThreadingServer(socketserver.ThreadingMixIn,
                       simple_server.WSGIServer):
    daemon_threads = True


def main(argv=None):
    application = app.init_application(argv)
    httpd = simple_server.make_server(
        CONF.puma_api.host, CONF.puma_api.port, application,
        server_class=_ThreadingServer)
    httpd.serve_forever()


if __name__ == '__main__':
    sys.exit(main())
