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
"""Which split plans Nova's migration records show to be left over.

A plan is made for one live migration: by puma-api just before it asks
Nova (the conductor creates the migration record after the plan), or by
the destination during its checks (after the conductor created the
record).  Either way the migration that uses the plan changes its record
after the plan was made; when that change is Nova ending it in failure
and no live migration of the server goes on, nothing will use the plan.

Statuses of a live migration in Nova 34: the conductor creates it
'accepted' and sets 'error' when it fails it (no valid host, a failed
precheck, binding the ports on the destination); the source compute
sets 'queued', 'preparing', 'running' (the libvirt driver 'running
(post-copy)'), then 'completed', or 'error' / 'failed' (a rollback),
or 'cancelled' (an abort).
"""

# A live migration Nova ended without moving the server.
FAILED = ('error', 'failed', 'cancelled')
# A live migration Nova ended, whatever the result.
ENDED = FAILED + ('completed',)


def changed_at(record):
    """When Nova last changed a migration record (created, if never)."""
    return record['updated_at'] or record['created_at']


def failed_migration(entry, records):
    """The failed migration that leaves ENTRY unused, or None.

    :param entry: a planned or failed ledger entry (its created_at a
        naive UTC datetime).
    :param records: the server's live-migration records, newest first
        (NovaClient.live_migrations).
    :returns: the newest record changed since the entry was planned when
        it ended in failure and no live migration of the server is in
        progress; None when one is (it may still use the plan), when the
        newest ended otherwise, or when none changed since the plan (an
        earlier attempt's).
    """
    if any(r['status'] not in ENDED for r in records):
        return None
    # Nova's database keeps whole seconds: a failure in the second of
    # the plan counts.
    planned = entry['created_at'].replace(microsecond=0)
    since = [r for r in records if changed_at(r) >= planned]
    if since and since[0]['status'] in FAILED:
        return since[0]
    return None
