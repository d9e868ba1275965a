# SPDX-License-Identifier: Apache-2.0
"""Benchmark dispatcher: ``lab/bench NAME``.

Each benchmark is a module in :mod:`puma_lab.benches` with a ``run(argv)``
function returning a dict of figures.  Progress goes to stderr; stdout ends
with exactly one JSON line ``{"bench": NAME, ...}``.
"""

import importlib
import json
import pkgutil
import sys

from puma_lab import benches
from puma_lab import errors


def names():
    return sorted(m.name for m in pkgutil.iter_modules(benches.__path__))


def main(argv):
    if not argv or argv[0] in ('-h', '--help', '--list'):
        print('benchmarks: ' + ', '.join(names()))
        return 0 if argv else 2
    name = argv[0]
    if name not in names():
        print('lab/bench: unknown benchmark %r (known: %s)'
              % (name, ', '.join(names())), file=sys.stderr)
        return 2
    mod = importlib.import_module('puma_lab.benches.' + name)
    try:
        figures = mod.run(argv[1:])
    except errors.LabError as e:
        print('lab/bench %s failed: %s' % (name, e), file=sys.stderr)
        return 1
    print(json.dumps(dict({'bench': name}, **figures), sort_keys=False))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
