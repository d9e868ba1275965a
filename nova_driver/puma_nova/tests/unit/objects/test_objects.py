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

"""Puma's versioned objects: fingerprints, the wire form, refusals."""

from oslo_versionedobjects import fixture as ovo_fixture
import testtools

from puma_nova import context
from puma_nova import exception
from puma_nova import objects
from puma_nova.objects import base
from puma_nova.objects import host_report
from puma_nova.objects import lending_pair
from puma_nova import rpc
from puma_nova.tests.unit.sched import base as sched_base

# A change of an object's fields or remotable methods changes its
# fingerprint: bump the object's VERSION (with obj_make_compatible for
# the older one) and put the new fingerprint here, as Nova's
# test_objects.py asks.
OBJECT_DATA = {
    'PumaHostReport': '1.3-0ea188fa7b4ad9cdcdfead9b1b4bf985',
    'PumaLendingPair': '1.0-a069fde9f5411ea06ed7a2833d1121ac',
    'PumaVMReport': '1.1-10e314e9df07135e609ea501ae16fd21',
}


def _stats():
    return dict(sched_base.stats(100, [
        sched_base.vm('a', free_mb=2048, lendable=True),
        dict(sched_base.vm('b', project=None), puma={'gets': 3}),
        sched_base.vm('c', free_mb=1024, grace=True)]),
        merged_mb=300, cache_saved_mb=200)


def _without_grace(stats):
    return dict(stats, vms=[dict(vm, lending_grace=False)
                            for vm in stats['vms']])


class TestObjectVersions(testtools.TestCase):

    def test_versions(self):
        objects.register_all()
        checker = ovo_fixture.ObjectVersionChecker(base.obj_classes())
        expected, actual = checker.test_hashes(OBJECT_DATA)
        self.assertEqual(expected, actual,
                         'An object changed: bump its version and update '
                         'OBJECT_DATA')

    def test_names_never_shadow_novas(self):
        objects.register_all()
        self.assertEqual(sorted(OBJECT_DATA), sorted(base.obj_classes()))
        for name in base.obj_classes():
            self.assertTrue(name.startswith('Puma'), name)


class TestHostReport(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.ctxt = context.get_admin_context()
        self.serializer = rpc.get_serializer()

    def test_stats_round_trip(self):
        stats = _stats()
        report = host_report.PumaHostReport.from_stats('h', stats)
        self.assertEqual(stats, report.to_stats())

    def test_wire_form_is_a_versioned_primitive(self):
        report = host_report.PumaHostReport.from_stats('h', _stats())
        wire = self.serializer.serialize_entity(self.ctxt, report)
        self.assertEqual('PumaHostReport', wire['puma_object.name'])
        self.assertEqual('1.3', wire['puma_object.version'])
        self.assertEqual('puma', wire['puma_object.namespace'])
        back = self.serializer.deserialize_entity(self.ctxt, wire)
        self.assertIsInstance(back, host_report.PumaHostReport)
        self.assertEqual(_stats(), back.to_stats())

    def test_stats_of_a_compute_older_than_merged_mb(self):
        stats = _stats()
        del stats['merged_mb']
        report = host_report.PumaHostReport.from_stats('h', stats)
        self.assertEqual(dict(stats, merged_mb=0), report.to_stats())

    def test_1_0_wire_form_has_no_merged_mb(self):
        report = host_report.PumaHostReport.from_stats('h', _stats())
        wire = report.obj_to_primitive(target_version='1.0')
        self.assertEqual('1.0', wire['puma_object.version'])
        self.assertNotIn('merged_mb', wire['puma_object.data'])
        self.assertEqual(['1.0', '1.0', '1.0'], [
            vm['puma_object.version']
            for vm in wire['puma_object.data']['vms']])
        back = self.serializer.deserialize_entity(self.ctxt, wire)
        self.assertEqual('1.0', back.VERSION)
        back.validate('h')
        self.assertEqual(dict(_without_grace(_stats()), merged_mb=0,
                              cache_saved_mb=0),
                         back.to_stats())

    def test_1_1_wire_form_has_vms_without_lending_grace(self):
        report = host_report.PumaHostReport.from_stats('h', _stats())
        wire = report.obj_to_primitive(target_version='1.1')
        self.assertEqual('1.1', wire['puma_object.version'])
        vms = wire['puma_object.data']['vms']
        self.assertEqual(['1.0'] * 3, [vm['puma_object.version']
                                       for vm in vms])
        for vm in vms:
            self.assertNotIn('lending_grace', vm['puma_object.data'])
        back = self.serializer.deserialize_entity(self.ctxt, wire)
        back.validate('h')
        # merged_mb stays; grace is unknown to such a scheduler: none.
        self.assertEqual(dict(_without_grace(_stats()), cache_saved_mb=0),
                         back.to_stats())

    def test_stats_of_a_compute_older_than_cache_saved_mb(self):
        stats = _stats()
        del stats['cache_saved_mb']
        report = host_report.PumaHostReport.from_stats('h', stats)
        self.assertEqual(dict(stats, cache_saved_mb=0), report.to_stats())

    def test_1_2_wire_form_has_no_cache_saved_mb(self):
        report = host_report.PumaHostReport.from_stats('h', _stats())
        wire = report.obj_to_primitive(target_version='1.2')
        self.assertEqual('1.2', wire['puma_object.version'])
        self.assertNotIn('cache_saved_mb', wire['puma_object.data'])
        self.assertEqual(300, wire['puma_object.data']['merged_mb'])
        self.assertEqual(['1.1'] * 3, [
            vm['puma_object.version']
            for vm in wire['puma_object.data']['vms']])
        back = self.serializer.deserialize_entity(self.ctxt, wire)
        back.validate('h')
        self.assertEqual(dict(_stats(), cache_saved_mb=0), back.to_stats())

    def test_stats_of_a_compute_older_than_lending_grace(self):
        stats = _stats()
        for vm in stats['vms']:
            del vm['lending_grace']
        report = host_report.PumaHostReport.from_stats('h', stats)
        self.assertEqual(_without_grace(stats), report.to_stats())

    def test_bad_dictionary_is_refused_before_sending(self):
        stats = _stats()
        stats['vms'][0]['memory_mb'] = -5
        e = self.assertRaises(exception.InvalidStats,
                              host_report.PumaHostReport.from_stats,
                              'h', stats)
        self.assertIn('vms/0/memory_mb', str(e))

    def _wire(self):
        report = host_report.PumaHostReport.from_stats('h', _stats())
        return self.serializer.serialize_entity(self.ctxt, report)

    def test_bad_field_on_the_wire_is_refused(self):
        wire = self._wire()
        wire['puma_object.data']['vms'][1]['puma_object.data'][
            'rss_mb'] = -1
        e = self.assertRaises(exception.InvalidPayload,
                              self.serializer.deserialize_entity,
                              self.ctxt, wire)
        self.assertIn('rss_mb', str(e))

    def test_newer_version_is_refused(self):
        wire = self._wire()
        wire['puma_object.version'] = '1.7'
        e = self.assertRaises(exception.InvalidPayload,
                              self.serializer.deserialize_entity,
                              self.ctxt, wire)
        self.assertIn('1.7', str(e))

    def test_unknown_object_is_refused(self):
        wire = self._wire()
        wire['puma_object.name'] = 'PumaNoSuchThing'
        self.assertRaises(exception.InvalidPayload,
                          self.serializer.deserialize_entity,
                          self.ctxt, wire)

    def test_missing_field_is_refused_by_validate(self):
        wire = self._wire()
        del wire['puma_object.data']['vms'][0]['puma_object.data'][
            'lendable']
        report = self.serializer.deserialize_entity(self.ctxt, wire)
        e = self.assertRaises(exception.InvalidStats, report.validate, 'h')
        self.assertIn('vms/0/lendable not set', str(e))

    def test_miss_rate_above_one_is_refused_by_validate(self):
        report = host_report.PumaHostReport.from_stats('h', _stats())
        report.vms[0].cache_miss_rate = 1.5
        e = self.assertRaises(exception.InvalidStats, report.validate, 'h')
        self.assertIn('vms/0/cache_miss_rate', str(e))


class TestLendingPair(testtools.TestCase):

    PAIR = {'lender': 'l', 'borrower': 'b', 'lender_address': '10.9.0.3',
            'borrower_address': '10.9.0.2', 'capacity_mb': 256,
            'key': 'secret-of-the-pair'}

    def test_round_trip_over_the_serializer(self):
        ctxt = context.get_admin_context()
        serializer = rpc.get_serializer()
        pair = lending_pair.PumaLendingPair.from_dict(self.PAIR)
        wire = serializer.serialize_entity(ctxt, [pair])
        self.assertEqual('PumaLendingPair', wire[0]['puma_object.name'])
        back = serializer.deserialize_entity(ctxt, wire)
        self.assertEqual([self.PAIR], [p.to_dict() for p in back])

    def test_key_never_shows_in_repr(self):
        pair = lending_pair.PumaLendingPair.from_dict(self.PAIR)
        self.assertNotIn('secret-of-the-pair', repr(pair))
