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

from nova import exception
from nova import objects
from nova import test
from nova.tests.fixtures import libvirt as fakelibvirt
from oslo_utils.fixture import uuidsentinel as uuids

from puma_nova.virt import split


def _instance(extra_specs=None, image_props=None, numa=None, sysmeta=None):
    flavor = objects.Flavor(memory_mb=4096, vcpus=2, root_gb=1,
                            extra_specs=extra_specs or {})
    sysmeta = dict(sysmeta or {})
    # Nova builds instance.image_meta from the image_* system metadata.
    sysmeta.update(('image_' + k, v) for k, v in (image_props or {}).items())
    return objects.Instance(
        uuid=uuids.instance, flavor=flavor, numa_topology=numa, image_ref='',
        system_metadata=sysmeta)


class SplitAllowedTest(test.NoDBTestCase):

    def test_flavor_extra_spec(self):
        self.assertTrue(split.is_allowed(
            _instance({'puma:split': 'allowed'})))

    def test_image_property(self):
        self.assertTrue(split.is_allowed(
            _instance(sysmeta={'image_puma_split': 'allowed'})))

    def test_not_asked(self):
        self.assertFalse(split.is_allowed(_instance()))
        self.assertFalse(split.is_allowed(
            _instance({'puma:split': 'yes please'})))

    def test_refuses_without_spec(self):
        ex = self.assertRaises(exception.MigrationPreCheckError,
                               split.check_splittable, _instance())
        self.assertIn('puma:split=allowed', str(ex))


class SplitRefusalTest(test.NoDBTestCase):

    def _refused(self, instance, words):
        ex = self.assertRaises(exception.MigrationPreCheckError,
                               split.check_splittable, instance)
        self.assertIn(words, str(ex))

    def test_native_tls_accepted(self):
        # libvirt reaches the memory servers over TLS as well.
        self.flags(live_migration_with_native_tls=True, group='libvirt')
        self.assertIsNone(split.config_refusal())
        split.check_splittable(_instance({'puma:split': 'allowed'}))

    def test_tunnelled(self):
        self.flags(live_migration_tunnelled=True, group='libvirt')
        self._refused(_instance({'puma:split': 'allowed'}),
                      'live_migration_tunnelled')

    def test_plain_transport_accepted(self):
        self.assertIsNone(split.config_refusal())

    def test_numa_topology(self):
        numa = objects.InstanceNUMATopology(cells=[
            objects.InstanceNUMACell(id=0, cpuset=set([0]), pcpuset=set(),
                                     memory=4096)])
        self._refused(_instance({'puma:split': 'allowed'}, numa=numa),
                      'NUMA topology')

    def test_numa_nodes_spec(self):
        self._refused(_instance({'puma:split': 'allowed',
                                 'hw:numa_nodes': '2'}), 'NUMA topology')

    def test_hugepages_flavor(self):
        self._refused(_instance({'puma:split': 'allowed',
                                 'hw:mem_page_size': 'large'}),
                      'huge pages')

    def test_hugepages_image(self):
        self._refused(_instance({'puma:split': 'allowed'},
                                image_props={'hw_mem_page_size': 'large'}),
                      'huge pages')

    def test_pinning(self):
        self._refused(_instance({'puma:split': 'allowed',
                                 'hw:cpu_policy': 'dedicated'}),
                      'pinned CPUs')

    def test_mixed_pinning(self):
        # Some vCPUs pinned, the others floating: still pinned CPUs.
        self._refused(_instance({'puma:split': 'allowed',
                                 'hw:cpu_policy': 'mixed',
                                 'hw:cpu_dedicated_mask': '^0'}),
                      'pinned CPUs')

    def test_pinning_image(self):
        self._refused(_instance({'puma:split': 'allowed'},
                                image_props={'hw_cpu_policy': 'dedicated'}),
                      'pinned CPUs')

    def test_realtime(self):
        for value in ('yes', 'true', 'True', '1'):
            self._refused(_instance({'puma:split': 'allowed',
                                     'hw:cpu_realtime': value}),
                          'realtime instances cannot be split')

    def test_realtime_off_accepted(self):
        for value in ('no', 'false', '0'):
            split.check_splittable(_instance({'puma:split': 'allowed',
                                              'hw:cpu_realtime': value}))

    def test_shared_cpus_accepted(self):
        split.check_splittable(_instance({'puma:split': 'allowed',
                                          'hw:cpu_policy': 'shared'}))


class MigrateParamsTest(test.NoDBTestCase):

    def test_params(self):
        params = split.migrate_params({'sub_uri': 'tcp:10.0.0.2:49200',
                                       'main_limit_mb': 1024})
        self.assertEqual({'split.sub-host-uri': 'tcp:10.0.0.2:49200',
                          'split.main-limit': 1024 * 1024 * 1024}, params)

    def test_mirror(self):
        params = split.migrate_params({'sub_uri': 'tcp:a:1',
                                       'main_limit_mb': 1,
                                       'mirror_uri': 'tcp:b:2'})
        self.assertEqual('tcp:b:2', params['split.mirror-uri'])

    def test_bad_plans(self):
        for plan in ({'main_limit_mb': 1},
                     {'sub_uri': 'a:1', 'main_limit_mb': 1},
                     {'sub_uri': 'tcp:a:1', 'main_limit_mb': 0},
                     {'sub_uri': 'tcp:a:1', 'main_limit_mb': '1'},
                     {'sub_uri': 'tcp:a:1', 'main_limit_mb': True}):
            self.assertRaises(ValueError, split.migrate_params, plan)

    def test_split_domain_adds_params_and_flag(self):
        calls = []

        class Domain(object):
            def name(self):
                return 'dom'

            def migrateToURI3(self, uri, params, flags):
                calls.append((uri, params, flags))

        dom = split.SplitDomain(Domain(), {'split.main-limit': 5})
        dom.migrateToURI3('qemu+tcp://dest/system',
                          params={'bandwidth': 0}, flags=1)
        self.assertEqual('dom', dom.name())
        self.assertEqual([('qemu+tcp://dest/system',
                           {'bandwidth': 0, 'split.main-limit': 5},
                           1 | (1 << 21))], calls)

    def test_split_domain_drops_post_copy_and_parallel(self):
        # Nova adds them when [libvirt] live_migration_permit_post_copy or
        # live_migration_parallel_connections > 1 are set; libvirt
        # refuses both with VIR_MIGRATE_SPLIT.
        calls = []

        class Domain(object):
            def name(self):
                return 'dom'

            def migrateToURI3(self, uri, params, flags):
                calls.append((params, flags))

        live, p2p, postcopy, parallel = 1, 2, 1 << 15, 1 << 17
        dom = split.SplitDomain(Domain(), {'split.main-limit': 5})
        dom.migrateToURI3('qemu+tcp://dest/system',
                          params={'bandwidth': 0,
                                  'parallel.connections': 4},
                          flags=live | p2p | postcopy | parallel)
        dom.migrateToURI3('qemu+tcp://dest/system',
                          params={'bandwidth': 0}, flags=live | postcopy)
        self.assertEqual(
            [({'bandwidth': 0, 'split.main-limit': 5},
              live | p2p | split.VIR_MIGRATE_SPLIT),
             ({'bandwidth': 0, 'split.main-limit': 5},
              live | split.VIR_MIGRATE_SPLIT)], calls)

    def test_split_domain_auto_converge_where_permitted(self):
        # Nova leaves auto-converge out where post-copy is permitted; a
        # split has no post-copy, so it gets auto-converge if permitted.
        calls = []

        class Domain(object):
            def name(self):
                return 'dom'

            def migrateToURI3(self, uri, params, flags):
                calls.append(flags)

        live, postcopy = 1, 1 << 15
        ac = split.VIR_MIGRATE_AUTO_CONVERGE
        dom = split.SplitDomain(Domain(), {'split.main-limit': 5})
        dom.migrateToURI3('qemu+tcp://dest/system', params={},
                          flags=live | postcopy)
        self.flags(live_migration_permit_auto_converge=True,
                   group='libvirt')
        dom.migrateToURI3('qemu+tcp://dest/system', params={},
                          flags=live | postcopy)
        dom.migrateToURI3('qemu+tcp://dest/system', params={},
                          flags=live | ac)
        self.assertEqual([live | split.VIR_MIGRATE_SPLIT,
                          live | ac | split.VIR_MIGRATE_SPLIT,
                          live | ac | split.VIR_MIGRATE_SPLIT], calls)

    def test_flag_values_are_libvirts(self):
        # Nova's fakelibvirt copies libvirt's values.
        self.assertEqual(fakelibvirt.VIR_MIGRATE_POSTCOPY,
                         split.VIR_MIGRATE_POSTCOPY)
        self.assertEqual(fakelibvirt.VIR_MIGRATE_PARALLEL,
                         split.VIR_MIGRATE_PARALLEL)
        self.assertEqual(fakelibvirt.VIR_MIGRATE_AUTO_CONVERGE,
                         split.VIR_MIGRATE_AUTO_CONVERGE)
