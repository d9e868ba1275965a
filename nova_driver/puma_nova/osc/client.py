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
"""A small client of the Puma REST API v1 (keystoneauth adapter)."""

import urllib.parse

from keystoneauth1 import adapter
from keystoneauth1 import exceptions as ks_exc
from osc_lib import exceptions


# The puma-api microversion this client speaks (paged lists: 1.1).
API_VERSION = '1.1'


class Client(object):

    def __init__(self, session, service_type='memory-pool',
                 interface=None, region_name=None, endpoint_override=None):
        self.http = adapter.Adapter(session, service_type=service_type,
                                    interface=interface,
                                    region_name=region_name,
                                    endpoint_override=endpoint_override,
                                    default_microversion=API_VERSION)

    def _request(self, method, url, **kwargs):
        try:
            resp = self.http.request(url, method, raise_exc=False, **kwargs)
        except ks_exc.ClientException as e:
            raise exceptions.CommandError('cannot reach puma-api: %s' % e)
        if resp.status_code >= 400:
            try:
                message = resp.json()['error']['message']
            except (ValueError, KeyError, TypeError):
                message = resp.text
            raise exceptions.CommandError('puma-api answered %d: %s' %
                                          (resp.status_code, message))
        return resp.json()

    def list(self, resource, microversion=None, **filters):
        """GET /v1/RESOURCE with the filters that are not None.

        Every page: the "next" links are followed to the end.
        MICROVERSION: the one the caller needs, if newer than
        API_VERSION (a puma-api older than it answers 406, named).
        """
        params = {k: v for k, v in filters.items() if v is not None}
        key = resource.replace('-', '_')
        extra = {'microversion': microversion} if microversion else {}
        items = []
        while True:
            body = self._request('GET', '/v1/%s' % resource, params=params,
                                 **extra)
            items += body[key]
            nxt = [link['href'] for link in body.get(key + '_links', ())
                   if link.get('rel') == 'next']
            if not nxt:
                return items
            params = dict(urllib.parse.parse_qsl(
                urllib.parse.urlsplit(nxt[0]).query))

    def release_ledger_entry(self, entry_id):
        """POST /v1/ledger/ID/release: the entry as it is now."""
        return self._request('POST', '/v1/ledger/%s/release' % entry_id
                             )['ledger_entry']

    def split_migrate(self, server, host=None):
        body = {'server': server}
        if host:
            body['host'] = host
        return self._request('POST', '/v1/split-migrations',
                             json=body)['split_migration']
