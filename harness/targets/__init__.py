"""Systems under test. Each target lives behind the small interface in :mod:`harness.targets.base`."""
