# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures, and the rule that a test is never skipped by surprise.

- ``lab``: a lab per test, torn down whatever the test did.
- ``require``: what a test needs from our own stack (QEMU's split
  migration, the memory server, virsh's options, the Nova environment,
  ...).  Missing, it is a failure: a series that lost a feature must not
  turn its tests into skips and a green run.  ``PUMA_ALLOW_MISSING=1``
  makes it a skip instead, for developers of a partial stack, never
  under ``CI=true``.
- Every skip (and xfail) of the session must carry a reason matched by
  an entry of ``EXPECTED_SKIPS``; any other one is listed at the end and
  makes the run exit non-zero even if every test passed.
"""

import collections
import os
import re

import pytest

from puma_lab import lab as lab_mod

ALLOW_MISSING = 'PUMA_ALLOW_MISSING'


def in_ci():
    return os.environ.get('CI', '').lower() in ('true', '1', 'yes')


def missing_allowed():
    """PUMA_ALLOW_MISSING=1, and not a CI run."""
    return os.environ.get(ALLOW_MISSING) == '1' and not in_ci()


Expected = collections.namedtuple('Expected', 'pattern why allowed')

# The only skips a run may contain, each with why it is acceptable and
# when.  Keep this list short: a skip hides a test that did not run.
# (Built from every pytest.skip/skipif/importorskip under lab/tests: all
# of them were about our own stack, and became ``require``.)
EXPECTED_SKIPS = (
    Expected(
        pattern=r'^%s=1: ' % ALLOW_MISSING,
        why='a developer running a partial stack (e.g. a QEMU without the '
            'split series through PUMA_QEMU_PREFIX) asked for the tests of '
            'what it lacks to be skipped; require() words these reasons, '
            'and never skips under CI=true',
        allowed=missing_allowed),
)


def expected(reason):
    """The entry of EXPECTED_SKIPS that allows REASON now, or None."""
    for entry in EXPECTED_SKIPS:
        if entry.allowed() and re.search(entry.pattern, reason):
            return entry
    return None


def require(what, why):
    """Our stack must provide WHAT; WHY says why it does not (or None)."""
    if not why:
        return
    if missing_allowed():
        pytest.skip('%s=1: %s unavailable: %s' % (ALLOW_MISSING, what, why))
    pytest.fail('%s unavailable: %s\n(part of our stack: a failure, not a '
                'skip; %s=1 skips it outside CI)'
                % (what, why, ALLOW_MISSING), pytrace=False)


@pytest.fixture(name='require')
def require_fixture():
    """``require(what, why)``, see :func:`require`."""
    return require


@pytest.fixture
def lab(request):
    """A fresh lab; its console/daemon logs are kept under $PUMA_LOGS."""
    logs = os.environ.get('PUMA_LOGS')
    # Kbuild breaks on commas in paths: keep names to a safe alphabet.
    name = re.sub(r'[^A-Za-z0-9_.-]+', '-', request.node.name).strip('-')
    with lab_mod.Lab(name, keep_logs=logs) as lab:
        yield lab


@pytest.fixture(scope='session')
def cloud():
    """The lab cloud (puma_lab.cloud), up for every test that wants it.

    One per session: the cloud tests of several modules share it; the
    last module (test_zz_cloud_teardown) takes it down with ``no_cloud``
    and checks that nothing is left.
    """
    from puma_lab import cloud as cloud_mod
    require('the lab cloud', cloud_mod.missing())
    c = cloud_mod.Cloud()
    _CLOUDS.append(c)
    try:
        c.up()
        yield c
    finally:
        cloud_down()


_CLOUDS = []


def cloud_down():
    """Take the session's cloud down now (idempotent)."""
    from puma_lab import cloud as cloud_mod
    while _CLOUDS:
        c = _CLOUDS.pop()
        if c.lab is not None:
            cloud_mod.down(c.lab.dir, say=print,
                           keep_logs=os.environ.get('PUMA_LOGS'))


@pytest.fixture
def no_cloud():
    """The session's cloud is down (the last cloud test checks leftovers)."""
    cloud_down()


@pytest.fixture
def small_b(cloud):
    """Host b modelled with MAIN_FREE_MB free, as puma-scheduler sees it."""
    from puma_lab import cloud_checks as cc
    try:
        cc.model_small(cloud, 'b')
        yield 'b'
    finally:
        cloud.model_free_memory('b')


def skip_reason(report):
    """What a skipped (or xfailed) test or collector said."""
    if hasattr(report, 'wasxfail'):
        return 'xfail: %s' % (report.wasxfail or '(no reason)')
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        reason = longrepr[2]
    else:
        reason = str(longrepr)
    return reason[len('Skipped: '):] if reason.startswith('Skipped: ') \
        else reason


class SkipGuard:
    """Collects unexpected skips; fails the session if there are any."""

    def __init__(self):
        self.unexpected = []

    def _check(self, report):
        if report.skipped:
            reason = skip_reason(report)
            if expected(reason) is None:
                self.unexpected.append((report.nodeid, reason))

    def pytest_runtest_logreport(self, report):
        self._check(report)

    def pytest_collectreport(self, report):
        self._check(report)

    def pytest_sessionfinish(self, session):
        if self.unexpected and session.exitstatus in (
                pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter):
        if not self.unexpected:
            return
        tr = terminalreporter
        tr.write_sep('=', '%d unexpected skip(s): the run fails'
                     % len(self.unexpected), red=True, bold=True)
        for nodeid, reason in self.unexpected:
            tr.write_line('UNEXPECTED SKIP %s: %s' % (nodeid or '(session)',
                                                      reason))
        tr.write_line('A skip must match an entry of EXPECTED_SKIPS in '
                      'lab/tests/conftest.py; a missing part of our stack '
                      'is a failure (%s=1 skips it outside CI).'
                      % ALLOW_MISSING)


def pytest_configure(config):
    config.pluginmanager.register(SkipGuard(), 'puma-skip-guard')
