# SPDX-License-Identifier: Apache-2.0
"""The kernel-host tests of the full profile only.

test_khost_ksm.py boots the khost kernel, a kernel build of its own
(lab/setup khost, which lab/test runs in the full profile only): the
default, lean run does not collect it, so it is neither run nor skipped
there (README, "Tests").
"""

from puma_lab import profile

collect_ignore = [] if profile.name() == 'full' else ['test_khost_ksm.py']
