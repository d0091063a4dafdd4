"""Typed measurements (strategies.measurement) become the task record's fields only when the
record is written: a field marked absent is left out while None, a flat dict's entries are
fields of their own, and a strategy's parts are found by type, not by key."""
import dataclasses
from typing import Dict, Optional

from strategies.measurement import Checkpointing, Measurement, TaskSummary, absent, fields_of, flat
from strategies.parameter_server.records import PsCoordinator, PsFields, PsWorker
from tfbench.loop.step_loop import StepTiming


@dataclasses.dataclass
class Part:
    kept_none: Optional[int]
    knobs: Dict = flat()
    left_out: Optional[int] = absent()


def summary(**changes):
    return dataclasses.replace(TaskSummary("default", 4, 1, 1, 4, "tiny", "train", "fp32"), **changes)


def test_absent_fields_are_left_out_while_none_and_flat_dicts_spread():
    assert fields_of(Part(None, {"all_reduce": "ring"})) == {"kept_none": None, "all_reduce": "ring"}
    assert fields_of(Part(1, left_out=0)) == {"kept_none": 1, "left_out": 0}


def test_a_measurement_writes_its_summary_parts_and_optional_fields():
    m = Measurement("worker", 0, 4, [StepTiming(1.0, 0.5)], summary(), placement={"kind": "soft"},
                    checkpoint=Checkpointing(2, 0), parts=(Part(3, {"knob": 1}),))
    fields = m.fields()
    assert fields["step_label"] == "own step" and fields["strategy"] == "default" and fields["replicas"] == 1
    assert fields["placement"] == {"kind": "soft"} and fields["knob"] == 1 and fields["kept_none"] == 3
    assert fields["checkpoint_every"] == 2 and fields["restored_from_step"] == 0
    assert "convergence" not in fields and "left_out" not in fields
    assert m.part(Part).kept_none == 3 and m.part(PsWorker) is None
    bare = Measurement("worker", 0, 4, [], summary()).fields()
    assert not {"placement", "convergence", "checkpoint_every", "restored_from_step"} & set(bare)


def test_parameter_server_parts_write_the_fields_of_their_mode():
    forward = PsWorker(0.25)
    assert fields_of(forward) == {"idleness": 0.25, "idleness_definition": forward.idleness_definition}
    sync = PsWorker(None, wait_s=[0.1], window_end=5.0, staleness={"updates": 1}, staleness_per_update=[0],
                    time_split={"updates": 1})
    assert set(fields_of(sync)) == {"idleness", "idleness_definition", "wait_s", "window_end", "staleness",
                                    "staleness_per_update", "time_split"}
    chief = fields_of(PsCoordinator(6, 3.0, {"0": 3, "1": 3}, 0, {"steps": []}, apply_step_s=[0.01],
                                    skipped_closures=0, update_location="ps"))
    assert chief["counts_toward_cluster"] is False and chief["cluster_steps"] is True
    assert chief["updates_counted"] == "measured window only" and "bound_waits" not in chief
    assert chief["apply_step_s"] == [0.01] and "clock_staleness" not in chief
    common = fields_of(PsFields(False, 2, -1, {"ps_0": {"bytes": 1}}, {"ps_partitioner": "min_size"}))
    assert common == {"ps_sync": False, "num_ps": 2, "ps_staleness_bound": -1, "ps_shards": {"ps_0": {"bytes": 1}},
                      "ps_partitioner": "min_size"}
