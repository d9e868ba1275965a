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
"""WSGI entry point of puma-api (the puma-api-wsgi script, uwsgi).

    uwsgi --http :9891 --wsgi-file $(which puma-api-wsgi)
    uwsgi --http :9891 --module puma_nova.wsgi.api:application

The configuration is ``$OS_PUMA_CONFIG_DIR/puma.conf`` (default
``/etc/puma/puma.conf``), as Nova's WSGI applications read
``$OS_NOVA_CONFIG_DIR``; without that file oslo.config's own search
applies.
"""

import os

# Before anything imports oslo.messaging or oslo.service.
from puma_nova import threads
threads.use_native_threads()

from puma_nova.api import app  # noqa: E402

CONFIG_DIR_ENV = 'OS_PUMA_CONFIG_DIR'
CONFIG_FILE = 'puma.conf'


def config_args():
    """oslo.config arguments naming the configuration file, if any."""
    path = os.path.join(os.environ.get(CONFIG_DIR_ENV, '/etc/puma'),
                        CONFIG_FILE)
    return ['--config-file', path] if os.path.exists(path) else []


def init_application():
    return app.init_application(config_args())
