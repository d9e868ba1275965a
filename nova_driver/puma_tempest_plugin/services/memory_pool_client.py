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

"""REST client of puma-api (service type memory-pool)."""

import contextlib
from urllib import parse

from oslo_serialization import jsonutils as json
from tempest.lib.common import rest_client

HEADER = 'OpenStack-API-Version'
SERVICE_TYPE = 'memory-pool'


class MemoryPoolClient(rest_client.RestClient):
    """puma-api's /v1 resources.

    Without a microversion puma-api answers at its minimum (1.0); ``with
    client.microversion('1.1'):`` sends that version in between.
    """

    api_microversion = None

    @contextlib.contextmanager
    def microversion(self, version):
        before, self.api_microversion = self.api_microversion, version
        try:
            yield self
        finally:
            self.api_microversion = before

    def get_headers(self, accept_type=None, send_type=None):
        headers = super().get_headers(accept_type, send_type)
        if self.api_microversion:
            headers[HEADER] = '%s %s' % (SERVICE_TYPE, self.api_microversion)
        return headers

    def _get(self, path, **params):
        if params:
            path += '?' + parse.urlencode(sorted(params.items()))
        resp, body = self.get(path)
        self.expected_success(200, resp.status)
        return rest_client.ResponseBody(resp, json.loads(body))

    def follow(self, href):
        """GET a "next" link puma-api gave (a full URL)."""
        resp, body = self.get(href[len(self.base_url):].lstrip('/')
                              if href.startswith(self.base_url) else href)
        self.expected_success(200, resp.status)
        return rest_client.ResponseBody(resp, json.loads(body))

    def list_hosts(self, **params):
        return self._get('v1/hosts', **params)

    def list_pairs(self, **params):
        return self._get('v1/pairs', **params)

    def list_memory_servers(self, **params):
        return self._get('v1/memory-servers', **params)

    def list_ledger(self, **params):
        return self._get('v1/ledger', **params)

    def release_ledger_entry(self, entry_id):
        resp, body = self.post('v1/ledger/%s/release' % entry_id, '')
        self.expected_success(200, resp.status)
        return rest_client.ResponseBody(resp, json.loads(body))
