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
"""Calls of the Horizon plugin to puma-api: the one place it talks REST.

The API is found in the user's service catalog (type memory-pool) and
called with the user's token through the OSC plugin's client.
"""

from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from openstack_dashboard.api import base

from puma_nova.osc import client as puma_client
from puma_nova.osc import plugin

SERVICE_TYPE = plugin.SERVICE_TYPE


def _client(request):
    url = base.url_for(request, SERVICE_TYPE)
    auth = token_endpoint.Token(url, request.user.token.id)
    return puma_client.Client(ks_session.Session(auth=auth),
                              endpoint_override=url)


def pair_list(request):
    return _client(request).list('pairs')


def ledger_list(request, active=True):
    return _client(request).list('ledger', active='true' if active else None)


def memory_server_list(request):
    return _client(request).list('memory-servers')
