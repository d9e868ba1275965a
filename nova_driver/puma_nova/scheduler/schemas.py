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
"""JSON schema of the statistics compute hosts report (report_host)."""

import jsonschema

from puma_nova import exception

_count = {'type': 'integer', 'minimum': 0}

VM = {
    'type': 'object',
    'properties': {
        'uuid': {'type': 'string', 'minLength': 1, 'maxLength': 36},
        # None when nova-compute does not know the guest's instance; such
        # a VM is stored but never paired.
        'project_id': {'type': ['string', 'null'], 'minLength': 1,
                       'maxLength': 255},
        'memory_mb': _count,
        'rss_mb': _count,
        'free_mb': _count,
        'cache_miss_rate': {'type': 'number', 'minimum': 0, 'maximum': 1},
        'refaults': _count,
        'puma': {'oneOf': [{'type': 'null'},
                           {'type': 'object',
                            'additionalProperties': _count}]},
        'lendable': {'type': 'boolean'},
        # Optional: computes older than it do not send it.
        'lending_grace': {'type': 'boolean'},
    },
    'required': ['uuid', 'project_id', 'memory_mb', 'rss_mb', 'free_mb',
                 'cache_miss_rate', 'refaults', 'puma', 'lendable'],
}

HOST_STATS = {
    'type': 'object',
    'properties': {
        'memory_mb': _count,
        'free_mb': _count,
        'lendable_mb': _count,
        # Optional: computes older than it do not send it.
        'merged_mb': _count,
        'cache_saved_mb': _count,
        'address': {'type': 'string', 'maxLength': 255},
        'shoot4u': {'type': 'boolean'},
        'split': {'type': 'boolean'},
        'vms': {'type': 'array', 'items': VM},
    },
    'required': ['memory_mb', 'free_mb', 'lendable_mb', 'address',
                 'shoot4u', 'split', 'vms'],
}

_VALIDATOR = jsonschema.Draft7Validator(HOST_STATS)


def validate_stats(host, stats):
    """Raise InvalidStats naming the first problem in STATS of HOST."""
    if not isinstance(host, str) or not host or len(host) > 255:
        raise exception.InvalidStats('invalid host name %r' % (host,))
    error = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(stats))
    if error is not None:
        where = '/'.join(str(p) for p in error.absolute_path) or 'stats'
        raise exception.InvalidStats(
            'statistics of host %s rejected at %s: %s' %
            (host, where, error.message))
    uuids = [vm['uuid'] for vm in stats['vms']]
    if len(set(uuids)) != len(uuids):
        raise exception.InvalidStats(
            'statistics of host %s list a server twice' % host)
