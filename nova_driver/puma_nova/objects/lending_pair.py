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

"""A lending pair as puma-scheduler gives it to a host (apply_pairs, 1.2).

Before puma-compute RPC 1.2 the same pair was a plain dictionary; the
object reads and writes that form too.
"""

from oslo_versionedobjects import fields

from puma_nova.objects import base


@base.PumaObjectRegistry.register
class PumaLendingPair(base.PumaObject):
    """An idle VM (lender) that caches pages for a busy one (borrower).

    Version 1.0: Initial version
    """

    VERSION = '1.0'

    fields = {
        'lender': fields.StringField(),
        'borrower': fields.StringField(),
        # Addresses of the hosts the two VMs run on ('' if unknown: the
        # compute host refuses such a pair).
        'lender_address': fields.StringField(),
        'borrower_address': fields.StringField(),
        'capacity_mb': fields.NonNegativeIntegerField(),
        # The pair's own secret; never shown in logs or repr().
        'key': fields.SensitiveStringField(),
    }

    @classmethod
    def from_dict(cls, pair):
        return cls(**{k: pair[k] for k in cls.fields})

    def to_dict(self):
        return {k: getattr(self, k) for k in self.fields}


OBJECTS = (PumaLendingPair,)
