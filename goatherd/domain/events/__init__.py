"""The runtime's event vocabulary: every runtime schema ref and its one decoder.

Each runtime record schema has exactly one event class here, and no schema
string of the runtime appears anywhere else in goatherd (a test checks it).
Aggregates, recovery and every read model fold these events. Importing this
package registers every class and every upcaster of a retired shape.
"""

from goatherd.domain.events.base import *
from goatherd.domain.events.checkpoint import *
from goatherd.domain.events.execution import *
from goatherd.domain.events.legacy import *
from goatherd.domain.events.output import *
from goatherd.domain.events.run import *
from goatherd.domain.events.scope import *

# A literal list (not ``+=`` of the modules' lists) so mypy can follow the
# two-level re-export through ``goatherd.domain``.
__all__ = [
    "CheckpointClaimed",
    "CheckpointCreated",
    "CheckpointInvalidated",
    "CheckpointPruned",
    "CheckpointRestored",
    "ExecutionCompleted",
    "ExecutionCreated",
    "ExecutionFailed",
    "ExecutionRelationCreated",
    "ExecutionStarted",
    "FactPublished",
    "PlacedEvent",
    "GIT_BACKEND",
    "GuidanceInjected",
    "MergeProposed",
    "OpaqueRecord",
    "OutputClaimed",
    "OutputCommitted",
    "OutputSealed",
    "OutputSettled",
    "PUBLISHED_FACT_KIND_LABEL",
    "PUBLISHED_FACT_SCHEMA_REF",
    "RUNTIME_ACTOR",
    "RecordDecodeError",
    "RelationKind",
    "RunCompleted",
    "RuntimeEvent",
    "SandboxDestroyed",
    "ScopeCreated",
    "ScopeDiscarded",
    "ScopeForked",
    "ScopeHalted",
    "ScopeMerged",
    "ScopePruned",
    "SupervisorDecided",
    "SupervisorIntervened",
    "Upcaster",
    "WorkspaceApplied",
    "WorkspaceCaptured",
    "decode_fact",
    "decode_payload",
    "event_class_for",
    "is_runtime_schema",
    "register_event",
    "register_upcaster",
    "runtime_schemas",
    "runtime_witness_body",
    "runtime_witness_ref",
    "schemas_of",
    "upcast_git_checkpoint",
    "upcast_git_tree",
]
