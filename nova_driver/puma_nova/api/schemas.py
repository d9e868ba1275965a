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
"""JSON schemas of the request bodies and query strings of API v1."""

import jsonschema

from puma_nova import exception

_host = {'type': 'string', 'minLength': 1, 'maxLength': 255,
         'pattern': '^[^\\s]+$'}

SPLIT_MIGRATION = {
    'type': 'object',
    'properties': {
        'server': {'type': 'string', 'minLength': 1, 'maxLength': 255},
        'host': _host,
    },
    'required': ['server'],
    'additionalProperties': False,
}

# Query strings: every value is a string; only these keys are accepted.
# Pages of every list: at most LIMIT items (capped by [puma_api]
# max_limit) after the item whose key is MARKER.
_PAGE = {'limit': {'type': 'string', 'pattern': '^[1-9][0-9]{0,5}$'},
         'marker': {'type': 'string', 'minLength': 1, 'maxLength': 255}}


def _list_query(**properties):
    return {'type': 'object', 'properties': dict(_PAGE, **properties),
            'additionalProperties': False}


LIST_QUERY = {
    'hosts': _list_query(),
    'pairs': _list_query(),
    'memory_servers': _list_query(host=_host),
    'ledger': _list_query(host=_host,
                          server={'type': 'string', 'minLength': 1,
                                  'maxLength': 255},
                          active={'enum': ['true', 'false']},
                          stale={'enum': ['true', 'false']}),
}


def validate(schema, document, what):
    """Raise Invalid with the first problem of DOCUMENT (named WHAT)."""
    validator = jsonschema.Draft7Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is None:
        return
    where = '/'.join(str(p) for p in error.absolute_path)
    raise exception.Invalid('invalid %s%s: %s' % (
        what, ' at ' + where if where else '', error.message))
