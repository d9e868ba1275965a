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
"""The Nova calls puma-api and puma-scheduler make, behind an interface.

NovaClient is what they need from Nova: puma-api looks a server up,
then asks for its live migration to a host; puma-scheduler reads the
server's live-migration records to release the split plans of
migrations Nova failed.  SDKNovaClient implements it with openstacksdk
and the [nova] keystoneauth options; tests give the services their own
implementation.
"""

import abc

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
import openstack
from openstack import exceptions as sdk_exc
from oslo_config import cfg
from oslo_utils import timeutils

from puma_nova import exception

CONF = cfg.CONF

# os-migrations at 2.59: each record's uuid (what `openstack server
# migration show` names), newest first, paged with links.  Not 2.80: its
# project filter is the project that asked for the migration, not the
# server's; the server's uuid filters (all microversions).
MIGRATIONS_MICROVERSION = '2.59'


def _utc(value):
    """A naive UTC datetime from Nova's ISO 8601 time (None stays)."""
    if not value:
        return None
    return timeutils.normalize_time(timeutils.parse_isotime(value))


class NovaClient(metaclass=abc.ABCMeta):

    @abc.abstractmethod
    def get_server(self, server):
        """The server named or identified by SERVER, or None.

        :returns: {'id', 'name', 'host', 'status', 'memory_mb',
            'project_id'}
        """

    @abc.abstractmethod
    def live_migrate(self, server_id, host):
        """Ask Nova to live-migrate SERVER_ID to HOST.

        :raises NovaError: Nova refused (its message included) or could
            not be reached.
        """

    @abc.abstractmethod
    def live_migrations(self, server_id):
        """Nova's live-migration records of server SERVER_ID.

        Needs the os-migrations policies index and index:all_projects
        (admin by default).

        :returns: [{'uuid', 'status', 'dest_compute', 'created_at',
            'updated_at'}], newest first (Nova's order); the times are
            naive UTC datetimes, updated_at None for a record never
            changed.
        :raises NovaError: Nova refused (its message included) or could
            not be reached.
        """


class SDKNovaClient(NovaClient):
    """Nova through openstacksdk with puma-api's [nova] credentials."""

    def __init__(self):
        self._conn = None

    @property
    def conn(self):
        if self._conn is None:
            auth = ks_loading.load_auth_from_conf_options(CONF, 'nova')
            session = ks_loading.load_session_from_conf_options(
                CONF, 'nova', auth=auth)
            self._conn = openstack.connection.Connection(
                session=session, region_name=CONF.nova.region_name,
                compute_interface=CONF.nova.endpoint_type)
        return self._conn

    def get_server(self, server):
        srv = self.conn.compute.find_server(server, ignore_missing=True,
                                            all_projects=True)
        if srv is None:
            return None
        srv = self.conn.compute.get_server(srv.id)
        # Since API 2.47 the server embeds its flavor's RAM; before, only
        # the flavor's ID.
        ram = srv.flavor.ram if srv.flavor else None
        if not ram:
            ram = self.conn.compute.get_flavor(srv.flavor.id).ram
        return {'id': srv.id, 'name': srv.name, 'host': srv.compute_host,
                'status': srv.status, 'memory_mb': ram,
                'project_id': srv.project_id}

    def live_migrate(self, server_id, host):
        try:
            self.conn.compute.live_migrate_server(
                server_id, host=host, block_migration='auto')
        except (sdk_exc.SDKException, ks_exc.ClientException) as e:
            # keystoneauth's own errors (Nova or Keystone unreachable,
            # no endpoint) are not SDKExceptions.
            raise exception.NovaError(
                'Nova refused the live migration of server %s to %s: %s' %
                (server_id, host, e))

    def live_migrations(self, server_id):
        try:
            found = list(self.conn.compute.migrations(
                server_id=server_id, migration_type='live-migration',
                microversion=MIGRATIONS_MICROVERSION))
        except (sdk_exc.SDKException, ks_exc.ClientException) as e:
            raise exception.NovaError(
                'Nova did not list the live migrations of server %s: %s' %
                (server_id, e))
        # Nova's order since 2.59: newest first (created_at, then id).
        return [{'uuid': m.uuid, 'status': m.status,
                 'dest_compute': m.dest_compute,
                 'created_at': _utc(m.created_at),
                 'updated_at': _utc(m.updated_at)} for m in found]
