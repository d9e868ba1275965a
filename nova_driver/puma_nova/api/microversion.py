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
"""API microversions of puma-api, as Nova and Placement have them.

A client asks with ``OpenStack-API-Version: memory-pool X.Y`` (or
``latest``); without the header it gets the minimum.  Every answer says
which version it is (same header, plus ``Vary``).

History:

    * 1.0 - Initial version.
    * 1.1 - Lists page: ``?limit=&marker=`` and a ``NAME_links`` "next"
            link while rows remain (1.0 cuts at [puma_api] max_limit).
    * 1.2 - Hosts show ``merged_mb``: the memory their page merging
            (KSM) saves.
    * 1.3 - Hosts show ``cache_saved_mb``: the host page cache their
            exclusive host/guest caching saves.
"""

import re

from puma_nova import exception

SERVICE_TYPE = 'memory-pool'
HEADER = 'OpenStack-API-Version'
MIN_VERSION = (1, 0)
MAX_VERSION = (1, 3)

_VERSION = re.compile(r'^([1-9][0-9]*)\.(0|[1-9][0-9]*)$')


class NotAcceptable(exception.PumaException):
    code = 406


def text(version):
    return '%d.%d' % version


def requested(headers):
    """The (major, minor) a request asks for; raises on a bad header."""
    wanted = None
    for item in headers.get(HEADER, '').split(','):
        parts = item.strip().split(None, 1)
        if len(parts) == 2 and parts[0].lower() == SERVICE_TYPE:
            wanted = parts[1].strip()
    if wanted is None:
        return MIN_VERSION
    if wanted.lower() == 'latest':
        return MAX_VERSION
    m = _VERSION.match(wanted)
    if not m:
        raise exception.Invalid('invalid %s %s: %r (want %s X.Y or latest)'
                                % (HEADER, SERVICE_TYPE, wanted,
                                   SERVICE_TYPE))
    version = (int(m.group(1)), int(m.group(2)))
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise NotAcceptable('version %s of the %s API is not supported: '
                            'this puma-api serves %s to %s'
                            % (wanted, SERVICE_TYPE, text(MIN_VERSION),
                               text(MAX_VERSION)))
    return version
