# SPDX-License-Identifier: Apache-2.0
"""lab/lib/steps.sh: the order of lab/setup's steps, and the steps that
run beside the builds."""

import os
import subprocess

from puma_lab import paths

LIB = os.path.join(paths.TOP, 'lab', 'lib')

# A run_step that logs when each step starts and ends; FAIL names a step
# that fails, SLOW one that takes longer than the others.
FAKE_RUN_STEP = '''
run_step() {
    echo "start $1" >>"$LOG"
    if [ "$1" = "${SLOW:-}" ]; then sleep 2; else sleep 0.2; fi
    [ "$1" != "${FAIL:-}" ] || die "step $1 failed"
    echo "end $1" >>"$LOG"
}
'''


def steps(tmp_path, args, **env):
    log = tmp_path / 'log'
    script = ('. %s/common.sh; . %s/steps.sh; %s run_steps $(order_steps %s)'
              % (LIB, LIB, FAKE_RUN_STEP, args))
    p = subprocess.run(['bash', '-c', script], capture_output=True,
                       text=True, env=dict(os.environ, LOG=str(log), **env))
    lines = log.read_text().splitlines() if log.exists() else []
    return p, lines


def test_steps_run_once_in_their_order(tmp_path):
    p, lines = steps(tmp_path, 'image deps image kernels')
    assert p.returncode == 0, p.stderr
    # Without stack nothing runs beside: one after another, in order.
    assert lines == ['start deps', 'end deps', 'start kernels',
                     'end kernels', 'start image', 'end image']
    assert 'setup step 3/3 (image)' in p.stderr


def test_image_and_cloud_run_beside_the_builds(tmp_path):
    p, lines = steps(tmp_path, 'cloud nova kvm image stack kernels deps',
                     SLOW='stack')
    assert p.returncode == 0, p.stderr
    # The kernels are unpacked before the image is made of them.
    assert lines.index('end kernels') < lines.index('start image')
    # image and cloud start with stack and end while it builds.
    assert lines.index('start stack') < lines.index('end stack')
    for s in ('image', 'cloud'):
        assert lines.index('end kernels') < lines.index('start ' + s)
        assert lines.index('end %s' % s) < lines.index('end stack'), lines
    # The rest follows stack in order.
    assert lines[-4:] == ['start kvm', 'end kvm', 'start nova', 'end nova']
    assert 'setup step 5/5 (nova)' in p.stderr
    assert 'setup step (cloud), beside the builds' in p.stderr
    assert 'setup done (deps kernels stack image kvm nova cloud)' in p.stderr


def test_a_failed_step_beside_the_builds_fails_setup(tmp_path):
    p, lines = steps(tmp_path, 'deps kernels stack image cloud nova',
                     FAIL='image')
    assert p.returncode != 0
    assert 'step image failed' in p.stderr
    assert 'setup step(s) image cloud failed' in p.stderr
    assert 'setup done' not in p.stderr
    # The builds went on to their end; cloud, after image, never ran.
    assert 'end nova' in lines and 'start cloud' not in lines
