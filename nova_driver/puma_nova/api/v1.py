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
"""API v1 resources.

GET  /v1/hosts              hosts and their latest memory report
GET  /v1/pairs              lending pairs in force (keys never shown)
GET  /v1/memory-servers     memory servers (?host=)
GET  /v1/ledger             split-migration ledger
                            (?host=&server=&active=&stale=)
POST /v1/ledger/ID/release  release a planned or failed entry
POST /v1/split-migrations   {"server": ID or name, "host": optional}

Since microversion 1.1 (puma_nova.api.microversion) every list takes
?limit=&marker= and answers one page; when more rows follow, NAME_links
holds a "next" link (as Nova's lists do).  Since 1.2 hosts show
merged_mb, since 1.3 cache_saved_mb.
"""

import urllib.parse

from oslo_log import log as logging
import oslo_messaging as messaging

from puma_nova.api import microversion
from puma_nova.api import schemas
from puma_nova.db import api as db_api
from puma_nova import exception
from puma_nova import policy

LOG = logging.getLogger(__name__)

HOST_FIELDS = ('name', 'address', 'memory_mb', 'free_mb', 'lendable_mb',
               'shoot4u', 'split', 'updated_at')
# Host fields by the microversion that added them.
HOST_FIELDS_SINCE = {(1, 2): ('merged_mb',), (1, 3): ('cache_saved_mb',)}
PAIR_FIELDS = ('lender', 'borrower', 'lender_host', 'borrower_host',
               'capacity_mb', 'created_at')
MEMORY_SERVER_FIELDS = ('instance_uuid', 'host', 'size_mb', 'uri', 'state',
                        'updated_at')
LEDGER_FIELDS = ('id', 'instance_uuid', 'project_id', 'main_host',
                 'sub_host', 'mb', 'main_limit_mb', 'state', 'created_at',
                 'updated_at')


# The key of a row in each list: what a page's marker names.
PAGE_KEYS = {
    'hosts': lambda r: r['name'],
    'pairs': lambda r: '%s,%s' % (r['lender'], r['borrower']),
    'memory_servers': lambda r: r['instance_uuid'],
    'ledger': lambda r: str(r['id']),
}


def _view(row, fields):
    out = {}
    for f in fields:
        v = row[f]
        out[f] = v.isoformat() if hasattr(v, 'isoformat') else v
    return out


def _rpc_error(e):
    """An API exception for a failed scheduler call."""
    if isinstance(e, messaging.MessagingTimeout):
        return exception.PumaException(
            'the scheduler did not answer in time; retry later')
    name = getattr(e, 'exc_type', type(e).__name__)
    value = getattr(e, 'value', str(e))
    if name == 'PlanError':
        return exception.Conflict('no split migration possible: %s' % value)
    return exception.PumaException('scheduler error %s: %s' % (name, value))


class Controller(object):

    def __init__(self, scheduler_api, nova):
        self.scheduler = scheduler_api
        self.nova = nova

    @staticmethod
    def _page(req, name, rows, fields, conf):
        """{NAME: one page of ROWS, NAME_links: the next page, if any}.

        ROWS come in the database's stable order; a page holds at most
        ``limit`` items (never more than [puma_api] max_limit) after the
        one whose key (PAGE_KEYS) is ``marker``.  When more follow, a
        "next" link carries the last key as the next marker, so a client
        sees every row instead of a silent cut at max_limit.
        """
        query = dict(req.GET)
        limit = min(int(query.get('limit', conf.puma_api.max_limit)),
                    conf.puma_api.max_limit)
        if req.environ.get('puma.api_version',
                           microversion.MIN_VERSION) < (1, 1):
            if 'limit' in query or 'marker' in query:
                raise exception.Invalid('limit and marker need API '
                                        'microversion 1.1')
            # 1.0: the first max_limit rows, as it always answered.
            return {name: [_view(r, fields) for r in rows[:limit]]}
        key = PAGE_KEYS[name]
        start = 0
        if 'marker' in query:
            keys = [key(r) for r in rows]
            if query['marker'] not in keys:
                raise exception.Invalid('marker %s not found'
                                        % query['marker'])
            start = keys.index(query['marker']) + 1
        page = rows[start:start + limit]
        body = {name: [_view(r, fields) for r in page]}
        if start + limit < len(rows):
            query.update(marker=key(page[-1]), limit=str(limit))
            body[name + '_links'] = [{
                'rel': 'next',
                'href': '%s?%s' % (req.path_url,
                                   urllib.parse.urlencode(sorted(
                                       query.items())))}]
        return body

    @policy.authorized('puma:host:list')
    def hosts(self, req, ctxt, conf):
        schemas.validate(schemas.LIST_QUERY['hosts'], dict(req.GET),
                         'query')
        version = req.environ.get('puma.api_version',
                                  microversion.MIN_VERSION)
        fields = HOST_FIELDS + tuple(
            f for since, added in sorted(HOST_FIELDS_SINCE.items())
            if version >= since for f in added)
        return 200, self._page(req, 'hosts', db_api.host_list(ctxt),
                               fields, conf)

    @policy.authorized('puma:pair:list')
    def pairs(self, req, ctxt, conf):
        schemas.validate(schemas.LIST_QUERY['pairs'], dict(req.GET),
                         'query')
        return 200, self._page(req, 'pairs', db_api.pair_list(ctxt),
                               PAIR_FIELDS, conf)

    @policy.authorized('puma:memory_server:list')
    def memory_servers(self, req, ctxt, conf):
        query = dict(req.GET)
        schemas.validate(schemas.LIST_QUERY['memory_servers'], query,
                         'query')
        rows = db_api.memory_server_list(ctxt, host=query.get('host'))
        return 200, self._page(req, 'memory_servers', rows,
                               MEMORY_SERVER_FIELDS, conf)

    @policy.checked_in_action('puma:ledger:list')
    def ledger(self, req, ctxt, conf):
        """The whole ledger, or the entries of the caller's project.

        As Nova's lists (servers, os-migrations): puma:ledger:list
        gives every project's entries; a caller it refuses gets its own
        project's entries if puma:ledger:list:project allows them (no
        one by default), else the refusal of puma:ledger:list.
        """
        project_id = None
        try:
            policy.authorize(ctxt, 'puma:ledger:list')
        except exception.Forbidden:
            if not policy.allowed(ctxt, 'puma:ledger:list:project',
                                  policy.resource_target(ctxt.project_id)):
                raise
            project_id = ctxt.project_id
        query = dict(req.GET)
        schemas.validate(schemas.LIST_QUERY['ledger'], query, 'query')
        rows = db_api.ledger_list(ctxt, host=query.get('host'),
                                  instance_uuid=query.get('server'),
                                  active_only=query.get('active') == 'true',
                                  project_id=project_id)
        if query.get('stale') == 'true':
            # What the scheduler's expiry releases: planned or failed
            # longer than plan_ttl.
            stale = {e['id'] for e in db_api.ledger_stale(
                ctxt, db_api.since(conf.puma_scheduler.plan_ttl))}
            rows = [r for r in rows if r['id'] in stale]
        return 200, self._page(req, 'ledger', rows, LEDGER_FIELDS, conf)

    @staticmethod
    def _visible_entry(ctxt, entry_id):
        """Ledger entry ENTRY_ID if CTXT may see it (else not found)."""
        entry = db_api.ledger_get(ctxt, entry_id)
        if not policy.may_see(ctxt, entry['project_id']):
            raise exception.LedgerNotFound('no ledger entry %s' % entry_id)
        return entry

    @policy.checked_in_action('puma:ledger:release')
    def release_entry(self, req, ctxt, conf, entry_id):
        """Release a planned or failed entry through the scheduler.

        The rule's target is the entry's project.
        """
        entry = self._visible_entry(ctxt, int(entry_id))
        policy.authorize(ctxt, 'puma:ledger:release',
                         policy.resource_target(entry['project_id']))
        try:
            self.scheduler.release_entry(ctxt, entry['id'])
        except messaging.RemoteError as e:
            if e.exc_type == 'LedgerNotFound':
                raise exception.LedgerNotFound(e.value)
            if e.exc_type == 'InvalidTransition':
                raise exception.InvalidTransition(e.value)
            raise _rpc_error(e)
        except messaging.MessagingException as e:
            raise _rpc_error(e)
        LOG.info('Ledger entry %s released on request', entry_id)
        return 200, {'ledger_entry': _view(db_api.ledger_get(
            ctxt, entry['id']), LEDGER_FIELDS)}

    def _pick_main_host(self, ctxt, conf, server):
        """The live host with the most uncommitted free memory."""
        promised = db_api.ledger_commitments(ctxt)
        hosts = [h for h in db_api.host_list(
            ctxt, db_api.since(conf.puma_scheduler.host_timeout))
            if h['name'] != server['host'] and h['split']]
        if not hosts:
            raise exception.Conflict(
                'no other host with the split-migration stack reports to '
                'the scheduler')
        best = max(hosts, key=lambda h: (h['free_mb'] -
                                         promised.get(h['name'], 0),
                                         h['name']))
        return best['name']

    @staticmethod
    def _planned_ids(ctxt, server_id, main_host):
        return {e['id'] for e in db_api.ledger_list(
            ctxt, instance_uuid=server_id)
            if e['main_host'] == main_host and e['state'] == 'planned'}

    def _release_plan(self, ctxt, server_id, main_host, before):
        """Release the split this request planned, nothing else.

        Only entries planned for SERVER_ID with MAIN_HOST that were not
        in the ledger before the request (ids in BEFORE): the split the
        server runs with and a plan made by someone else (its
        destination, another request) stay.  Each is released only if
        still planned (release_entry).  If the scheduler does not
        answer, its expiry ([puma_scheduler] plan_ttl) releases it.
        """
        try:
            for entry_id in sorted(self._planned_ids(ctxt, server_id,
                                                     main_host) - before):
                self.scheduler.release_entry(ctxt, entry_id)
        except Exception as e:
            LOG.error('Could not release the split planned for %s on %s '
                      '(the scheduler releases it after plan_ttl): %s',
                      server_id, main_host, e)

    @policy.checked_in_action('puma:split_migration:create')
    def split_migrate(self, req, ctxt, conf, body):
        """Plan a split migration of a server, then ask Nova to move it.

        The rule's target is the server's project; a server the caller
        may not see (another project's, unless admin) is not found.
        """
        schemas.validate(schemas.SPLIT_MIGRATION, body, 'request body')
        server = self.nova.get_server(body['server'])
        if server is None or not policy.may_see(ctxt,
                                                server['project_id']):
            raise exception.ServerNotFound('server %s not found' %
                                           body['server'])
        policy.authorize(ctxt, 'puma:split_migration:create',
                         policy.resource_target(server['project_id']))
        if server['status'] != 'ACTIVE':
            raise exception.Conflict(
                'server %s is %s; only ACTIVE servers can be live-migrated'
                % (server['id'], server['status']))
        main_host = body.get('host') or self._pick_main_host(ctxt, conf,
                                                             server)
        before = self._planned_ids(ctxt, server['id'], main_host)
        try:
            plan = self.scheduler.plan_split(
                ctxt, server['id'], server['memory_mb'], main_host,
                server['project_id'], source_host=server.get('host'))
        except messaging.MessagingTimeout as e:
            # The scheduler may have recorded the plan all the same.
            self._release_plan(ctxt, server['id'], main_host, before)
            raise _rpc_error(e)
        except messaging.MessagingException as e:
            raise _rpc_error(e)
        except Exception as e:
            # The in-process bus re-raises the scheduler's exception.
            if type(e).__name__ != 'PlanError':
                raise
            raise _rpc_error(e)
        try:
            self.nova.live_migrate(server['id'], main_host)
        except Exception as e:
            # Nothing moves: give back what this request planned.
            self._release_plan(ctxt, server['id'], main_host, before)
            if isinstance(e, exception.PumaException):
                raise
            raise exception.NovaError(
                'could not ask Nova for the live migration of server %s '
                'to %s: %s' % (server['id'], main_host, e))
        LOG.info('Split migration of %s to %s requested', server['id'],
                 main_host)
        return 202, {'split_migration': {
            'server': server['id'], 'main_host': main_host,
            'sub_host': plan['sub_host'],
            'main_limit_mb': plan['main_limit_mb'],
            'remote_mb': plan['remote_mb'],
            'state': 'planned' if plan['sub_host'] else 'whole'}}
