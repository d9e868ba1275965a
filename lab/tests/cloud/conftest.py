"""What every cloud test shares: no server outlives the test that made it.

The cloud tests share one cloud (the session's ``cloud`` fixture), so a
server that a failed test leaves behind would fail the next tests too
(their "nothing left" checks), hiding which one broke (CI of 2026-12-02:
a failed abort test left its server, and two later tests failed on it).
After each test, servers it made are deleted; one that a test which
passed left behind is that test's error.

With this file, ``conftest`` names two modules: tests take ``require``
as a fixture rather than import it.
"""

import pytest

from puma_lab import cloud_checks as cc
from puma_lab import errors


def servers(cloud):
    """IDs of every project's servers."""
    return {s['ID'] for s in cc.osc(cloud, 'server', 'list',
                                    '--all-projects')}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, 'puma_report_' + report.when, report)


@pytest.fixture(autouse=True)
def no_server_left(request):
    if 'cloud' not in request.fixturenames:
        yield
        return
    cloud = request.getfixturevalue('cloud')
    try:
        before = servers(cloud)
    except errors.LabError as e:
        # The test itself will meet the cloud's trouble.
        print('servers before %s not listed: %s' % (request.node.name, e))
        yield
        return
    yield
    try:
        left = servers(cloud) - before
    except errors.LabError as e:
        print('servers after %s not listed: %s' % (request.node.name, e))
        return
    for uuid in sorted(left):
        print('server %s left by %s: deleting it' % (uuid, request.node.name))
        cc.discard(cloud, uuid)
    call = getattr(request.node, 'puma_report_call', None)
    if left and call is not None and call.passed:
        pytest.fail('the test left servers behind: %s' % sorted(left))
