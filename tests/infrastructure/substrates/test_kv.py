"""The SQLite KV substrate: its own world database, one transaction per batch."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from goatherd.application import Substrate, SubstrateError
from goatherd.domain import MaterializationOutcome, Record
from goatherd.infrastructure.substrates import (
    KV_PUT_SCHEMA_REF,
    KVSubstrate,
    SQLiteKVSubstrate,
)
from tests.infrastructure.substrates.records import declaration


def put(key: object, value: object = None, record_id: str = "sha256:p") -> Record:
    payload = {"key": key} if value is None else {"key": key, "value": value}
    return declaration(KV_PUT_SCHEMA_REF, payload, record_id)


class TestKVSubstrate:
    def test_it_is_a_contained_substrate_with_the_reference_schemas(self) -> None:
        with SQLiteKVSubstrate() as kv:
            assert isinstance(kv, Substrate)
            assert kv.substrate_ref == "kv.sqlite.local.v1"
            assert kv.declaration_schemas == {"shepherd2.kv.put.v1"}
            assert kv.capture_schemas == {"shepherd2.kv.put.applied.v1"}
            assert kv.containment == "contained"
        assert KVSubstrate is SQLiteKVSubstrate

    def test_puts_land_in_the_world_file_with_captures_and_anchors(
        self, tmp_path: Path
    ) -> None:
        world = tmp_path / "world.sqlite"
        with SQLiteKVSubstrate(world) as kv:
            result = kv.materialize(
                [
                    put("answer", {"n": 42, "f": 1.0}, "sha256:a"),
                    put("ünï", [1, "x"], "sha256:b"),
                ]
            )
            assert result.outcome is MaterializationOutcome.SUCCESS
            assert result.failure_reason == ""
            first, second = result.capture_drafts
            assert first.schema_ref == "shepherd2.kv.put.applied.v1"
            assert first.kind_label == "kv_put_applied"
            assert first.mode == "capture"
            assert first.payload == {"key": "answer", "value": {"n": 42, "f": 1.0}}
            assert first.caused_by_fact_ids == ("sha256:a",)
            assert second.caused_by_fact_ids == ("sha256:b",)
            assert result.world_side_anchors == (
                {
                    "kind": "kv_key",
                    "key": "answer",
                    "substrate_ref": "kv.sqlite.local.v1",
                },
                {"kind": "kv_key", "key": "ünï", "substrate_ref": "kv.sqlite.local.v1"},
            )
            assert kv.get("missing") is None
        # The world survives the substrate and keeps int and float apart.
        with SQLiteKVSubstrate(world) as again:
            value = again.get("answer")
            assert value == {"n": 42, "f": 1.0}
            assert isinstance(value, dict)
            assert type(value["n"]) is int
            assert type(value["f"]) is float
            assert again.get("ünï") == [1, "x"]
        rows = (
            sqlite3.connect(world).execute("SELECT key, value_json FROM kv").fetchall()
        )
        assert ("answer", '{"f":1.0,"n":42}') in rows
        assert ("ünï", '[1,"x"]') in rows

    def test_a_replay_is_deterministic_and_overwrites_in_place(self) -> None:
        with SQLiteKVSubstrate() as kv:
            records = [put("k", 1, "sha256:a")]
            assert kv.materialize(records) == kv.materialize(records)
            kv.materialize([put("k", 2, "sha256:b")])
            assert kv.get("k") == 2

    @pytest.mark.parametrize(
        ("bad", "message"),
        [
            (put("", 1, "sha256:bad"), "key must be a non-empty string"),
            (put(7, 1, "sha256:bad"), "key must be a non-empty string"),
            (put("k", None, "sha256:bad"), "value is required"),
        ],
    )
    def test_a_malformed_put_refuses_the_whole_batch_before_any_write(
        self, bad: Record, message: str
    ) -> None:
        with SQLiteKVSubstrate() as kv:
            kv.materialize([put("keep", "old", "sha256:0")])
            with pytest.raises(SubstrateError, match=message):
                kv.materialize([put("keep", "new", "sha256:1"), bad])
            assert kv.get("keep") == "old"

    def test_a_null_value_is_a_value(self) -> None:
        with SQLiteKVSubstrate() as kv:
            record = declaration(KV_PUT_SCHEMA_REF, {"key": "k", "value": None})
            kv.materialize([record])
            assert kv.get("k") is None
            assert kv.materialize([record]).capture_drafts[0].payload == {
                "key": "k",
                "value": None,
            }
