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

"""The split plans a compute host made as destination, kept in a file.

A destination plans a split migration in its checks (nova-compute, the
driver); the source asks for the plan before it migrates (the
destination's puma-compute-agent answers); the destination finishes or
drops it after the migration, and the source may drop it after a
rollback.  Two processes of the host therefore read and change the
plans: they live in ``<instances_path>/puma/split-plans.json``, read
afresh by every operation; a change reads, changes and writes the file
under an exclusive ``flock`` of ``split-plans.json.lock``.  It is written
to a temporary file, synced and renamed over the old one: a reader sees
the old plans or the new ones, and a failed write (disk full) changes
nothing and raises.
Restarting nova-compute or the agent loses no plan.

Each plan names its main host (the destination); a host sees only its
own plans, so that hosts sharing an instances path (Nova's in-process
functional tests) do not see each other's.  Plans older than MAX_AGE
are forgotten when the file is next written: by then the Puma scheduler
has expired their ledger entries, and a plan is only ever used for the
migration it was made for.
"""

import contextlib
import fcntl
import json
import os
import tempfile
import threading
import time

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

FILE = 'split-plans.json'
# Seconds a plan is kept at most (a day).
MAX_AGE = 24 * 3600
# Keys without which a plan is not one (entries that lack them are
# dropped, with an error in the log, when the file is read).
_REQUIRED = ('instance_uuid', 'main_host', 'sub_host')


class SplitPlans(object):
    """The split plans of HOST, in the file at PATH.

    The file holds ``{"version": 1, "plans": [{"plan": PLAN,
    "planned_at": SECONDS}, ...]}``.  Reads take no lock (a rename is
    atomic); changes read, change and write under the file lock.
    """

    def __init__(self, path, host, clock=time.time):
        self.path = path
        self.host = host
        self._clock = clock
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def _locked(self):
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with self._lock, open(self.path + '.lock', 'a') as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _read(self, locked=False):
        """Every host's entries in the file (a list of dictionaries)."""
        try:
            with open(self.path) as f:
                data = json.load(f)
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as e:
            # Never silently: the plans of migrations in flight are lost,
            # and Nova's checks then fail those migrations (no plan).
            # The next change keeps the file aside for whoever looks into
            # it.
            LOG.error('Puma: split plans in %s unreadable (%s); going on '
                      'without them', self.path, e)
            if locked:
                with contextlib.suppress(OSError):
                    os.replace(self.path, self.path + '.invalid')
                LOG.error('Puma: %s kept as %s.invalid', self.path,
                          self.path)
            return []
        entries = data.get('plans') if isinstance(data, dict) else None
        if not isinstance(entries, list):
            LOG.error('Puma: %s holds no list of split plans; going on '
                      'without them', self.path)
            return []
        good = []
        for entry in entries:
            plan = entry.get('plan') if isinstance(entry, dict) else None
            if (isinstance(plan, dict) and
                    isinstance(entry.get('planned_at'), (int, float)) and
                    all(isinstance(plan.get(k), str) and plan.get(k)
                        for k in _REQUIRED)):
                good.append(entry)
            else:
                LOG.error('Puma: invalid split plan in %s dropped: %r',
                          self.path, entry)
        return good

    def _write(self, entries):
        now = self._clock()
        entries = [e for e in entries if now - e['planned_at'] <= MAX_AGE]
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(self.path),
                                   prefix='.' + FILE)
        try:
            with os.fdopen(fd, 'w') as f:
                json.dump({'version': 1, 'plans': entries}, f, indent=1,
                          sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _mine(self, entry, instance_uuid=None):
        plan = entry['plan']
        return (plan['main_host'] == self.host and
                instance_uuid in (None, plan['instance_uuid']))

    def get(self, instance_uuid, migration_uuid=None):
        """This host's plan of the instance (a copy), or None.

        :param migration_uuid: only the plan made for that migration.
        """
        for entry in self._read():
            if self._mine(entry, instance_uuid):
                plan = entry['plan']
                if migration_uuid and (plan.get('migration_uuid') !=
                                       migration_uuid):
                    return None
                return plan
        return None

    def keep(self, plan):
        """Keep PLAN (it replaces this host's plan of its instance).

        :raises ValueError: PLAN is not one of this host's plans.
        :raises OSError: the file was not written (nothing changed).
        """
        if (plan.get('main_host') != self.host or
                not all(isinstance(plan.get(k), str) and plan.get(k)
                        for k in _REQUIRED)):
            raise ValueError('not a split plan of %s: %r'
                             % (self.host, plan))
        entry = {'plan': dict(plan), 'planned_at': self._clock()}
        with self._locked():
            entries = [e for e in self._read(locked=True)
                       if not self._mine(e, plan['instance_uuid'])]
            self._write(entries + [entry])

    def update(self, instance_uuid, **changes):
        """Change this host's plan of the instance; the new plan or None."""
        with self._locked():
            entries = self._read(locked=True)
            for entry in entries:
                if self._mine(entry, instance_uuid):
                    entry['plan'].update(changes)
                    self._write(entries)
                    return dict(entry['plan'])
        return None

    def pop(self, instance_uuid, main_host=None):
        """Forget this host's plan of the instance, returning it (or None).

        :param main_host: only if it is that host's plan (a plan is only
            ever this host's: another main host finds nothing).
        """
        if main_host is not None and main_host != self.host:
            return None
        # Most instances have no plan: nothing to lock or write for them.
        if self.get(instance_uuid) is None:
            return None
        with self._locked():
            entries = self._read(locked=True)
            found = [e['plan'] for e in entries
                     if self._mine(e, instance_uuid)]
            if not found:
                return None
            self._write([e for e in entries
                         if not self._mine(e, instance_uuid)])
        return found[0]

    def list(self):
        """This host's plans, by instance uuid."""
        return {e['plan']['instance_uuid']: e['plan'] for e in self._read()
                if self._mine(e)}


def path(instances_path):
    """Where a host whose instances path is INSTANCES_PATH keeps them."""
    return os.path.join(instances_path, 'puma', FILE)
