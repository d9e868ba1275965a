# Nova's unit test package sets the concurrency mode up (native threads
# under tox) and registers Nova's objects before nova.virt is imported.
import nova.tests.unit  # noqa: F401
