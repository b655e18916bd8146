"""``python -m harness.results``: regenerate docs/results.md's field tables from the registry."""

from .fields import write_docs

write_docs()
