# SPDX-License-Identifier: Apache-2.0
"""Our patch series apply to Debian's sources; a broken one is named."""

import os
import subprocess
import textwrap

import pytest

from puma_lab import paths

LIB = os.path.join(paths.TOP, 'lab', 'lib')


def stack(script, tmp_path):
    full = '. %s/common.sh; . %s/deps.sh; . %s/stack.sh; %s' % (
        LIB, LIB, LIB, script)
    return subprocess.run(['bash', '-c', full], capture_output=True,
                          text=True, timeout=900,
                          env=dict(os.environ,
                                   PUMA_CACHE=os.environ.get(
                                       'PUMA_CACHE', paths.CACHE)))


@pytest.fixture(scope='module')
def libvirt_tree(tmp_path_factory):
    """Debian's libvirt source with Debian's series applied, in git."""
    tree = tmp_path_factory.mktemp('src') / 'libvirt'
    p = stack('unpack_source libvirt "$(resolve_src_version libvirt '
              '"$LIBVIRT_SRC_VERSION_GLOB")" %s' % tree, tree.parent)
    assert p.returncode == 0, p.stderr
    return tree


def make_patch(tree, path, old, new, subject):
    """A git format-patch file changing OLD to NEW in PATH of TREE."""
    f = tree / path
    text = f.read_text()
    assert old in text
    f.write_text(text.replace(old, new, 1))
    git = ['git', '-C', str(tree), '-c', 'user.name=t', '-c',
           'user.email=t@localhost']
    subprocess.run(git + ['commit', '-qam', subject], check=True)
    out = subprocess.run(git + ['format-patch', '-1', '--stdout'],
                         capture_output=True, text=True, check=True).stdout
    subprocess.run(git + ['reset', '-q', '--hard', 'HEAD~1'], check=True)
    return out


@pytest.mark.parametrize('component', ['qemu', 'libvirt'])
def test_our_series_applies(component, tmp_path):
    """The committed series applies on a fresh Debian tree (both parts)."""
    series = os.path.join(paths.TOP, '%s-patches' % component)
    glob = '$%s_SRC_VERSION_GLOB' % component.upper()
    p = stack('tree=%s/src; unpack_source %s "$(resolve_src_version %s '
              '"%s")" "$tree" && apply_series "$tree" %s && '
              'git -C "$tree" log --oneline | wc -l'
              % (tmp_path, component, component, glob, series), tmp_path)
    assert p.returncode == 0, p.stderr
    listed = [ln for ln in open(os.path.join(series, 'series'))
              if ln.strip() and not ln.startswith('#')]
    assert int(p.stdout.split()[-1]) == 1 + len(listed)


def test_apply_step_applies_a_patch(libvirt_tree, tmp_path):
    series = tmp_path / 'series-ok'
    series.mkdir()
    (series / '0001-ok.patch').write_text(make_patch(
        libvirt_tree, 'VERSION' if (libvirt_tree / 'VERSION').exists()
        else 'meson.build', "project(", "project(  ", 'lab: test patch'))
    (series / 'series').write_text('0001-ok.patch\n')
    p = stack('apply_series %s %s && git -C %s log -1 --format=%%s'
              % (libvirt_tree, series, libvirt_tree), tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().endswith('lab: test patch')
    subprocess.run(['git', '-C', str(libvirt_tree), 'reset', '-q', '--hard',
                    'HEAD~1'], check=True)


def test_patch_that_does_not_apply_is_named(libvirt_tree, tmp_path):
    series = tmp_path / 'series-bad'
    series.mkdir()
    (series / '0001-bad.patch').write_text(textwrap.dedent('''\
        From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
        From: Lab <lab@localhost>
        Subject: [PATCH] lab: a patch against other code

        ---
         meson.build | 2 +-
         1 file changed, 1 insertion(+), 1 deletion(-)

        diff --git a/meson.build b/meson.build
        --- a/meson.build
        +++ b/meson.build
        @@ -1,3 +1,3 @@
        -this line is not in libvirt
        +nor is this one
         context one
         context two
        '''))
    (series / 'series').write_text('0001-bad.patch\n')
    head = subprocess.run(['git', '-C', str(libvirt_tree), 'rev-parse',
                           'HEAD'], capture_output=True, text=True).stdout
    p = stack('apply_series %s %s' % (libvirt_tree, series), tmp_path)
    assert p.returncode == 1
    assert 'patch %s/0001-bad.patch does not apply to libvirt' % series \
        in p.stderr
    after = subprocess.run(['git', '-C', str(libvirt_tree), 'rev-parse',
                            'HEAD'], capture_output=True, text=True).stdout
    assert after == head
