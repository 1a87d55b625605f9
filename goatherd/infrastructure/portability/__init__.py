"""Moving a trace between databases: ``goatherd export`` and ``import``.

``jsonl`` writes and reads the JSON-lines format; ``trace_import`` proves
an export line by line and writes it in one transaction; ``import_intent``
proves one intent line against the rows written before it. Import uses the
audit rules (``goatherd.infrastructure.audit.rules``) so it refuses what
``verify`` would name; it imports the domain, the store and the audit rules.
"""
