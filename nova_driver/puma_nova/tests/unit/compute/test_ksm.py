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

import os

import fixtures
import testtools

from puma_nova.compute import ksm


class SavedTest(testtools.TestCase):
    """The KSM counters as the kernel's sysfs files give them."""

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.log = self.useFixture(fixtures.FakeLogger())

    def _write(self, **counters):
        for name, text in counters.items():
            with open(os.path.join(self.dir, name), 'w') as f:
                f.write(text)

    def test_sharing_and_zero_pages_are_saved(self):
        # Written by the kernel with a newline; pages_shared (the merged
        # pages themselves) and general_profit are not savings.
        self._write(pages_sharing='1000\n', ksm_zero_pages='24\n',
                    pages_shared='300\n', general_profit='-5\n')
        self.assertEqual(1024 * 4096, ksm.saved_bytes(self.dir, 4096))

    def test_zero_pages_under_their_6_4_name(self):
        self._write(pages_sharing='1000\n', zero_pages_sharing='24\n')
        self.assertEqual(1024 * 4096, ksm.saved_bytes(self.dir, 4096))

    def test_mib_rounded_down(self):
        self._write(pages_sharing='%d\n' % (3 * 256 + 255))
        self.assertEqual(3, ksm.saved_mb(self.dir))

    def test_no_ksm_saves_nothing(self):
        self.assertEqual(0, ksm.saved_mb(os.path.join(self.dir, 'none')))
        self.assertEqual('', self.log.output)

    def test_bad_counter_is_logged_and_saves_nothing(self):
        for text in ('many\n', '-3\n'):
            self._write(pages_sharing=text)
            self.assertRaises(ValueError, ksm.saved_bytes, self.dir)
            self.assertEqual(0, ksm.saved_mb(self.dir))
        self.assertIn('cannot be read', self.log.output)
