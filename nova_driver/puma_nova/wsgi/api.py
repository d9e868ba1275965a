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

"""puma-api's WSGI application for a WSGI server (uWSGI, mod_wsgi).

    uwsgi --http-socket :9891 --module puma_nova.wsgi.api:application

As Nova's ``nova.wsgi.osapi_compute``: importing the module builds the
application, with ``$OS_PUMA_CONFIG_DIR/puma.conf`` (default
``/etc/puma/puma.conf``) when that file exists.
"""

from puma_nova.api import wsgi

application = wsgi.init_application()
