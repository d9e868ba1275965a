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

"""What a compute host reports to puma-scheduler (report_host, RPC 1.4).

The same document was a plain dictionary before 1.4 (``stats``); the
objects read and write that form too (:meth:`PumaHostReport.from_stats`,
:meth:`PumaHostReport.to_stats`), so that one scheduler serves both.
"""

from oslo_utils import versionutils
from oslo_versionedobjects import fields

from puma_nova import exception
from puma_nova.objects import base
from puma_nova.scheduler import schemas


@base.PumaObjectRegistry.register
class PumaVMReport(base.PumaObject):
    """Memory figures of one guest on the reporting host.

    Version 1.0: Initial version
    Version 1.1: Added lending_grace
    """

    VERSION = '1.1'

    fields = {
        'uuid': fields.StringField(),
        # None when nova-compute does not know the guest's instance: such
        # a VM is stored but never paired.
        'project_id': fields.StringField(nullable=True),
        'memory_mb': fields.NonNegativeIntegerField(),
        'rss_mb': fields.NonNegativeIntegerField(),
        'free_mb': fields.NonNegativeIntegerField(),
        'cache_miss_rate': fields.NonNegativeFloatField(),
        'refaults': fields.NonNegativeIntegerField(),
        # The Puma module's counters in the guest, None without it.
        'puma': fields.DictOfIntegersField(nullable=True),
        'lendable': fields.BooleanField(),
        # Not lendable, but its CPU was quiet at the previous report: the
        # scheduler keeps its pairs and gives it no new one. False in the
        # reports of computes older than it.
        'lending_grace': fields.BooleanField(default=False),
    }

    def obj_make_compatible(self, primitive, target_version):
        super().obj_make_compatible(primitive, target_version)
        target = versionutils.convert_version_to_tuple(target_version)
        if target < (1, 1):
            primitive.pop('lending_grace', None)


@base.PumaObjectRegistry.register
class PumaHostReport(base.PumaObject):
    """A compute host's memory and the VMs on it.

    Version 1.0: Initial version
    Version 1.1: Added merged_mb
    Version 1.2: PumaVMReport 1.1 (lending_grace)
    Version 1.3: Added cache_saved_mb
    """

    VERSION = '1.3'

    fields = {
        'memory_mb': fields.NonNegativeIntegerField(),
        'free_mb': fields.NonNegativeIntegerField(),
        'lendable_mb': fields.NonNegativeIntegerField(),
        # Memory the host's page merging (KSM) saves; 0 in the reports of
        # computes older than it.
        'merged_mb': fields.NonNegativeIntegerField(default=0),
        # Host page cache that exclusive host/guest caching saves; 0 in
        # the reports of computes older than it.
        'cache_saved_mb': fields.NonNegativeIntegerField(default=0),
        # Where this host's memory servers listen.
        'address': fields.StringField(),
        'shoot4u': fields.BooleanField(),
        'split': fields.BooleanField(),
        'vms': fields.ListOfObjectsField('PumaVMReport'),
    }
    # The PumaVMReport version of each version of this object (for
    # obj_make_compatible).
    obj_relationships = {'vms': [('1.0', '1.0'), ('1.2', '1.1')]}

    @classmethod
    def from_stats(cls, host, stats):
        """The report of a statistics dictionary (the form before 1.4).

        :raises: InvalidStats naming the first problem, as the scheduler
            names it.
        """
        schemas.validate_stats(host, stats)
        vms = []
        for vm in stats['vms']:
            # Optional fields missing from older computes' dictionaries
            # get their defaults.
            vms.append(PumaVMReport(**{k: vm[k] for k in PumaVMReport.fields
                                       if k in vm}))
            vms[-1].obj_set_defaults()
        values = {k: stats[k] for k in cls.fields
                  if k != 'vms' and k in stats}
        report = cls(vms=vms, **values)
        report.obj_set_defaults()
        return report

    def obj_make_compatible(self, primitive, target_version):
        super().obj_make_compatible(primitive, target_version)
        target = versionutils.convert_version_to_tuple(target_version)
        if target < (1, 1):
            primitive.pop('merged_mb', None)
        if target < (1, 3):
            primitive.pop('cache_saved_mb', None)

    def to_stats(self):
        """The statistics dictionary of this report."""
        out = {k: getattr(self, k) for k in self.fields if k != 'vms'}
        out['vms'] = [{k: getattr(vm, k) for k in vm.fields}
                      for vm in self.vms]
        return out

    def validate(self, host):
        """Check what the field types do not: the dictionary's schema.

        :raises: InvalidStats.
        """
        # A report of a compute older than the optional fields has none.
        for k in ('merged_mb', 'cache_saved_mb'):
            if not self.obj_attr_is_set(k):
                self.obj_set_defaults(k)
        for vm in (self.vms if self.obj_attr_is_set('vms') else ()):
            if not vm.obj_attr_is_set('lending_grace'):
                vm.obj_set_defaults('lending_grace')
        missing = [k for k in self.fields if not self.obj_attr_is_set(k)]
        missing += ['vms/%d/%s' % (i, k)
                    for i, vm in enumerate(self.vms
                                           if 'vms' not in missing else ())
                    for k in vm.fields if not vm.obj_attr_is_set(k)]
        if missing:
            raise exception.InvalidStats(
                'statistics of host %s rejected: %s not set'
                % (host, ', '.join(missing)))
        schemas.validate_stats(host, self.to_stats())


OBJECTS = (PumaVMReport, PumaHostReport)
