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

"""The memory the host's page merging (KSM) saves.

The kernel's KSM counters (Documentation/admin-guide/mm/ksm.rst) are in
``/sys/kernel/mm/ksm``: ``pages_sharing`` counts the mappings that share
a merged page beyond its first one, which is memory saved, and
``ksm_zero_pages`` (with ``use_zero_pages``, Linux 6.10 and later; named
``zero_pages_sharing`` in 6.4 to 6.9) the pages merged with the zero
page, saved as well.  The figure is what merging frees, before the cost
of KSM's own metadata (``general_profit`` subtracts it).

Guests opt out per flavor (``puma:page_merging=false``, see
:mod:`puma_nova.virt.page_merging`); a host without KSM, or with KSM
stopped and unmerged, saves nothing.
"""

import os

from oslo_log import log as logging
from oslo_utils import units

LOG = logging.getLogger(__name__)

SYSFS = '/sys/kernel/mm/ksm'
# Counters of saved pages, each under its names across kernel versions.
SAVED = (('pages_sharing',), ('ksm_zero_pages', 'zero_pages_sharing'))


def _read(sysfs, name):
    """The integer in SYSFS/NAME; None if the file does not exist."""
    try:
        with open(os.path.join(sysfs, name)) as f:
            text = f.read()
    except FileNotFoundError:
        return None
    value = int(text)
    if value < 0:
        raise ValueError('%s is negative' % name)
    return value


def saved_bytes(sysfs=None, page_size=None):
    """Bytes of guest memory the host's KSM merged away; 0 without KSM.

    SYSFS: the KSM directory (default SYSFS).

    :raises: OSError or ValueError when a counter that exists cannot be
        read as a count (the caller decides what to report then).
    """
    sysfs = sysfs or SYSFS
    page_size = page_size or os.sysconf('SC_PAGE_SIZE')
    pages = 0
    for names in SAVED:
        for name in names:
            value = _read(sysfs, name)
            if value is not None:
                pages += value
                break
    return pages * page_size


def saved_mb(sysfs=None):
    """saved_bytes() in MiB (rounded down); 0 if the counters are bad.

    A report must not fail for a figure that is only shown: an unreadable
    counter is logged and counts as nothing saved.
    """
    try:
        return saved_bytes(sysfs) // units.Mi
    except (OSError, ValueError) as e:
        LOG.warning('Puma: the page merging (KSM) counters in %s cannot '
                    'be read (%s); reporting nothing saved',
                    sysfs or SYSFS, e)
        return 0
