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
"""What a split lends, written to placement when it is planned.

A split migration keeps part of an instance's memory on a sub host.
The sub host's MEMORY_MB ``reserved`` in placement grows by that part
when the split is planned and shrinks when it is given back, so that
Nova's scheduler sees at once that the memory is taken (see
docs/nova-compute.md, "Placement: the lending ledger").

Every change is a read-modify-write of the provider's MEMORY_MB
inventory checked by the provider's generation: placement bumps it on
every inventory and allocation change of the provider, so an instance
Nova claims on the sub host meanwhile, or an inventory update of its
nova-compute, makes the write fail with a generation conflict (409,
``placement.concurrent_update``); it is then read and tried again. A
lend that would leave the provider's allocations without room fails
with NoRoom and writes nothing.

The client is a keystoneauth1 adapter configured by the ``[placement]``
options of puma-scheduler (session, auth and adapter options, as Nova's
own ``[placement]`` group).
"""

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg
from oslo_log import log as logging

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

MEMORY_MB = 'MEMORY_MB'
# 1.23: errors carry a code; 1.26: reserved may equal total.
MICROVERSION = '1.26'
CONCURRENT_UPDATE = 'placement.concurrent_update'
# Attempts of one change when the provider keeps changing under it, as
# Nova's resource tracker retries its own provider updates.
ATTEMPTS = 4


class PlacementError(Exception):
    """Placement could not be read or written; the message says why."""


class NoRoom(PlacementError):
    """The sub host's provider has no room left for what is lent."""


def _error_code(resp):
    try:
        return resp.json()['errors'][0].get('code')
    except Exception:
        return None


def _error_text(resp):
    try:
        return '; '.join(e.get('detail') or e.get('title') or ''
                         for e in resp.json()['errors'])
    except Exception:
        return resp.text


class PlacementLending(object):
    """Changes the sub hosts' MEMORY_MB ``reserved`` in placement.

    :param adapter: a keystoneauth1 Adapter of the placement service;
        by default one is loaded from the ``[placement]`` options on
        first use.
    """

    def __init__(self, adapter=None):
        self._adapter = adapter
        # host name -> resource provider uuid
        self._providers = {}

    @property
    def adapter(self):
        if self._adapter is None:
            auth = ks_loading.load_auth_from_conf_options(CONF, 'placement')
            session = ks_loading.load_session_from_conf_options(
                CONF, 'placement', auth=auth)
            self._adapter = ks_loading.load_adapter_from_conf_options(
                CONF, 'placement', session=session, auth=auth,
                raise_exc=False)
        return self._adapter

    def _call(self, method, url, **kwargs):
        try:
            return getattr(self.adapter, method)(
                url, microversion=MICROVERSION, raise_exc=False, **kwargs)
        except ks_exc.ClientException as e:
            raise PlacementError('placement unreachable (%s %s): %s'
                                 % (method.upper(), url, e))

    def provider(self, host):
        """The uuid of the compute node provider named HOST.

        Nova names a compute node's resource provider after its
        hypervisor host name, which Puma takes to be the host's name.
        """
        uuid = self._providers.get(host)
        if uuid:
            return uuid
        resp = self._call('get', '/resource_providers',
                          params={'name': host})
        if resp.status_code != 200:
            raise PlacementError('cannot look up the resource provider of '
                                 'host %s: %s %s' % (host, resp.status_code,
                                                     _error_text(resp)))
        found = resp.json().get('resource_providers') or []
        if not found:
            raise PlacementError('placement has no resource provider named '
                                 '%s' % host)
        uuid = self._providers[host] = found[0]['uuid']
        return uuid

    def _read(self, rp_uuid):
        """(generation, MEMORY_MB inventory, MEMORY_MB used), consistent.

        Inventory and usage are two reads; they belong together only if
        the provider's generation did not change between them.
        """
        for _ in range(ATTEMPTS):
            inv = self._call('get', '/resource_providers/%s/inventories'
                             % rp_uuid)
            if inv.status_code != 200:
                raise PlacementError('cannot read the inventory of %s: %s '
                                     '%s' % (rp_uuid, inv.status_code,
                                             _error_text(inv)))
            use = self._call('get', '/resource_providers/%s/usages'
                             % rp_uuid)
            if use.status_code != 200:
                raise PlacementError('cannot read the usages of %s: %s %s'
                                     % (rp_uuid, use.status_code,
                                        _error_text(use)))
            inv, use = inv.json(), use.json()
            generation = inv['resource_provider_generation']
            if use['resource_provider_generation'] != generation:
                continue
            memory = inv['inventories'].get(MEMORY_MB)
            if memory is None:
                raise PlacementError('provider %s has no %s inventory'
                                     % (rp_uuid, MEMORY_MB))
            return generation, memory, use['usages'].get(MEMORY_MB, 0)
        raise PlacementError('provider %s kept changing while it was read'
                             % rp_uuid)

    def lend(self, host, mb):
        """Reserve MB MiB of HOST's MEMORY_MB; NoRoom if it has no room.

        :returns: the new ``reserved``.
        """
        return self._change(host, mb)

    def give_back(self, host, mb):
        """Give back MB MiB that a split lent from HOST.

        :returns: the new ``reserved``.
        """
        return self._change(host, -mb)

    def _change(self, host, delta):
        rp_uuid = self.provider(host)
        for attempt in range(1, ATTEMPTS + 1):
            generation, memory, used = self._read(rp_uuid)
            total = memory['total']
            reserved = max(0, memory['reserved'] + delta)
            if delta > 0:
                capacity = int((total - reserved) *
                               memory['allocation_ratio'])
                if reserved > total or used > capacity:
                    raise NoRoom(
                        'host %s cannot lend %d MiB: placement has %d MiB '
                        'of its memory allocated and %d MiB reserved of '
                        '%d MiB (allocation ratio %s)'
                        % (host, delta, used, memory['reserved'], total,
                           memory['allocation_ratio']))
            body = dict(memory, reserved=reserved,
                        resource_provider_generation=generation)
            resp = self._call('put', '/resource_providers/%s/inventories/%s'
                              % (rp_uuid, MEMORY_MB), json=body)
            if resp.status_code == 200:
                LOG.info('Placement: %s MEMORY_MB reserved %d -> %d MiB',
                         host, memory['reserved'], reserved)
                return reserved
            if (resp.status_code == 409 and
                    _error_code(resp) == CONCURRENT_UPDATE):
                LOG.debug('Placement: provider %s of %s changed '
                          '(attempt %d): %s', rp_uuid, host, attempt,
                          _error_text(resp))
                continue
            if resp.status_code == 404:
                # The compute node was recreated: look it up again.
                self._providers.pop(host, None)
            raise PlacementError('cannot change the %s reserved of %s: '
                                 '%s %s' % (MEMORY_MB, host,
                                            resp.status_code,
                                            _error_text(resp)))
        raise PlacementError('provider %s of %s kept changing: %d '
                             'generation conflicts' % (rp_uuid, host,
                                                       ATTEMPTS))


def from_conf():
    """The placement client of puma-scheduler, or None if turned off."""
    if not CONF.puma_scheduler.placement_lending:
        return None
    return PlacementLending()
