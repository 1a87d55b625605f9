"""Settlement rules, the diff classifier and the reviewers."""

from __future__ import annotations

import pytest

from goatherd.domain import (
    DestructivePathReviewer,
    DraftsOnlyReviewer,
    MergeProposal,
    ParentMovedError,
    ProposedChange,
    SettlementAction,
    SupervisorDeniedError,
    UnknownSettlementActionError,
    apply_overlap,
    check_fast_forward,
    classify_changes,
    diff_digest,
    glob_match,
    parse_settlement_action,
)


def test_the_four_verbs_parse_and_anything_else_is_a_clear_error():
    assert [
        parse_settlement_action(a)
        for a in ("selected", "applied", "released", "discarded")
    ] == list(SettlementAction)
    with pytest.raises(
        UnknownSettlementActionError, match='unknown settlement action "merge"'
    ):
        parse_settlement_action("merge")


def test_select_is_strictly_fast_forward():
    check_fast_forward("out:x:1", "sha256:a", "sha256:a")
    with pytest.raises(ParentMovedError, match="use SettleApply"):
        check_fast_forward("out:x:1", "sha256:b", "sha256:a")


def test_apply_overlap_keeps_change_order():
    assert apply_overlap(["b", "a", "c"], {"a", "b"}) == ["b", "a"]
    assert apply_overlap(["x"], []) == []


GIT_DIFF = """diff --git a/src/app.py b/src/app.py
index 1..2 100644
--- a/src/app.py
+++ b/src/app.py
@@ -1 +1 @@
-old
+new
--- not a header inside a hunk
diff --git a/new.txt b/new.txt
new file mode 100644
--- /dev/null
+++ b/new.txt
@@ -0,0 +1,2 @@
+hello
+world
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
"""


def test_the_classifier_reads_kinds_paths_and_hunks():
    changes = classify_changes(GIT_DIFF, ["src/app.py", "bin/blob"])
    assert [(c.path, c.kind) for c in changes] == [
        ("src/app.py", "modify"),
        ("new.txt", "create"),
        ("gone.txt", "delete"),
        ("bin/blob", "modify"),
    ]
    assert changes[0].diff.startswith("@@ -1 +1 @@")
    assert "--- not a header inside a hunk" in changes[0].diff
    assert changes[1].diff == "hello\nworld"
    assert changes[3].diff == ""


def test_the_classifier_handles_headerless_and_empty_diffs():
    assert classify_changes("  \n") == ()
    assert classify_changes("", ["a"]) == (ProposedChange("a", "modify", ""),)
    plain = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-1\n+2\n"
    assert [(c.path, c.kind) for c in classify_changes(plain)] == [("x", "modify")]


def test_diff_digest_is_the_canonical_digest_of_the_diff_object():
    assert diff_digest("x") == diff_digest("x")
    assert diff_digest("x") != diff_digest("y")
    assert diff_digest("x").startswith("sha256:")


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("*.pem", "ca.pem", True),
        ("*.pem", "keys/ca.pem", False),
        ("secrets/*.key", "secrets/a.key", True),
        ("secrets/*.key", "secrets/x/a.key", False),
        ("?.txt", "a.txt", True),
        ("?.txt", "/.txt", False),
        ("[a-c]x", "bx", True),
        ("[^a-c]x", "bx", False),
        ("\\*", "*", True),
        ("[", "[", False),
        ("[]a]", "a", False),
        ("a\\", "a", False),
    ],
)
def test_glob_match_follows_go_path_match(pattern, path, expected):
    assert glob_match(pattern, path) is expected


def proposal(*paths: str) -> MergeProposal:
    return MergeProposal(
        "scope:c", "sha256:b", tuple(ProposedChange(p, "modify") for p in paths)
    )


def test_the_destructive_path_reviewer_matches_full_path_basename_and_prefix():
    reviewer = DestructivePathReviewer(("", "*.pem", "secrets/"))
    assert reviewer(proposal("src/a.py")) is None
    assert (
        reviewer(proposal("keys/ca.pem"))
        == 'change to "keys/ca.pem" matches destructive-path pattern "*.pem"'
    )
    assert (
        reviewer(proposal("secrets/deep/x"))
        == 'change to "secrets/deep/x" matches destructive-path pattern "secrets/"'
    )
    assert DestructivePathReviewer()(proposal("anything")) is None


def test_the_drafts_only_reviewer_denies_paths_outside_the_prefix():
    reviewer = DraftsOnlyReviewer("drafts")
    assert reviewer(proposal("drafts/a.md", "drafts")) is None
    assert (
        reviewer(proposal("draftsX/a"))
        == 'change to "draftsX/a" is outside the drafts prefix "drafts"'
    )
    assert DraftsOnlyReviewer("")(proposal("x")) is None


def test_a_denial_names_the_reason_and_the_changed_paths():
    error = SupervisorDeniedError("no secrets", proposal("a", "b").changes)
    assert str(error) == "merge review denied: no secrets (changed paths: a, b)"
    assert str(SupervisorDeniedError("no")) == "merge review denied: no"
