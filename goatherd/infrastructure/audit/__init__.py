"""Auditing a stored trace: ``goatherd verify`` and the read-only questions.

``verify`` (``verify_trace``) reads every stored row (``rows``), type-checks
each cell, and runs the checks (``checks``) and the cross-checks it shares
with import (``rules``); ``objects`` names database objects goatherd did not
create; ``inspection`` answers the CLI's read-only questions (counts, one
record, id prefixes). Modules here read the store through its reader and
schema modules and write nothing; they import the domain, the projections
and ``goatherd.infrastructure.store``/``blobs``, never the runtime.
"""
