# Nova's functional test package sets the concurrency mode up (native
# threads under tox) before anything imports nova.virt or oslo.privsep.
import nova.tests.functional  # noqa: F401
