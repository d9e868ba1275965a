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
"""Calls of the Horizon plugin to puma-api and Nova: the one place it
talks REST.

puma-api is found in the user's service catalog (type memory-pool) and
called with the user's token through the OSC plugin's client; Nova's
migration APIs through Horizon's own novaclient factory.
"""

import types

from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from novaclient import exceptions as nova_exceptions
from openstack_dashboard.api import _nova
from openstack_dashboard.api import base

from puma_nova.osc import client as puma_client
from puma_nova.osc import plugin
from puma_nova.osc.v1 import host as host_cmd
from puma_nova.osc.v1 import migration as migration_cmd

SERVICE_TYPE = plugin.SERVICE_TYPE
# Progress of a server's migration (2.23), force complete (2.22) and
# abort (2.24; of a queued or preparing one: 2.65).
NOVA_MICROVERSION = '2.65'
# Statuses of a live migration that has not ended (Nova's
# objects/migration.py and the libvirt driver's post-copy status).
LIVE_STATUSES = ('queued', 'preparing', 'running',
                 migration_cmd.POST_COPY_STATUS)


def _client(request):
    url = base.url_for(request, SERVICE_TYPE)
    auth = token_endpoint.Token(url, request.user.token.id)
    return puma_client.Client(ks_session.Session(auth=auth),
                              endpoint_override=url)


def host_list(request):
    """The hosts' last reports, with what merging and caching save."""
    return _client(request).list('hosts', microversion=host_cmd.MICROVERSION)


def pair_list(request):
    return _client(request).list('pairs')


def ledger_list(request, active=True):
    return _client(request).list('ledger', active='true' if active else None)


def memory_server_list(request):
    return _client(request).list('memory-servers')


def ledger_release(request, entry_id):
    """Release a planned or failed ledger entry (puma-api refuses others)."""
    return _client(request).release_ledger_entry(entry_id)


def _novaclient(request):
    return _nova.novaclient(request, NOVA_MICROVERSION)


def live_migration_list(request):
    """The live migrations in progress, each with its progress and split.

    Nova's os-migrations lists them (without progress), one status at a
    time; each one's
    progress comes from the server's migrations API and its split from
    puma-api's ledger.  A migration that ends between the two calls is
    left out.
    """
    nova = _novaclient(request)
    ledger = {}
    for entry in ledger_list(request):
        ledger.setdefault(entry['instance_uuid'], []).append(entry)
    # One query per status that has not ended: a cloud keeps every
    # migration it ever made.
    migrations = [m for status in LIVE_STATUSES
                  for m in nova.migrations.list(
                      status=status, migration_type='live-migration')]
    rows = []
    for m in sorted(migrations, key=lambda m: m.id):
        try:
            progress = nova.server_migrations.get(m.instance_uuid, m.id)
        except nova_exceptions.NotFound:
            continue
        server = types.SimpleNamespace(id=m.instance_uuid, name=None)
        row = migration_cmd.migration_view(
            server, [progress], ledger.get(m.instance_uuid, []))
        row['id'] = '%s:%s' % (m.instance_uuid, m.id)
        rows.append(row)
    return rows


def live_migration_abort(request, server, migration):
    _novaclient(request).server_migrations.live_migration_abort(server,
                                                                migration)


def live_migration_force_complete(request, server, migration):
    _novaclient(request).server_migrations.live_migrate_force_complete(
        server, migration)
