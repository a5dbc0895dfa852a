"""The Runs page's sweep form under AppTest: requests per cell follow the chosen prompt set, and
running servers can be measured over concurrency."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from helpers.apptest_run import run_clean
from helpers.paths import DASHBOARD
from specscope import launch
from specscope.analysis import intervals
from specscope.launch import registry
from specscope.prompts import library

pytestmark = pytest.mark.app

THREE = b'{"prompt": "one"}\n{"prompt": "two"}\n{"prompt": "three"}\n'


@pytest.fixture
def runs_page(page_env):
    at = AppTest.from_file(str(DASHBOARD), default_timeout=90).run()
    at.switch_page("views/runs.py")
    return at


def test_requests_per_cell_follow_the_chosen_sets_size(runs_page):
    _, saved = library.save(THREE, "three.jsonl")
    at = run_clean(runs_page)
    assert at.number_input(key="runs_num_prompts").value == 8  # a bundled set of 10+ prompts, capped
    small = next(o for o in at.selectbox(key="runs_set").options if o.startswith("uploaded: three"))
    at = run_clean(at.selectbox(key="runs_set").set_value(small))
    assert at.number_input(key="runs_num_prompts").value == 3
    assert at.number_input(key="runs_repeats").value == 3  # a small set: 3 interleaved repeats
    bundled = next(o for o in at.selectbox(key="runs_set").options if o.startswith("sample: "))
    at = run_clean(at.selectbox(key="runs_set").set_value(bundled))
    assert at.number_input(key="runs_num_prompts").value == 8


def test_sweeps_repeat_three_times_by_default_and_two_say_what_they_buy(runs_page):
    at = run_clean(runs_page)
    assert at.number_input(key="runs_repeats").value == intervals.DEFAULT_REPEATS == 3
    assert intervals.repeats_note(2) in at.number_input(key="runs_repeats").help  # said before, and on a start


def test_running_servers_can_be_measured_over_concurrency(runs_page, metrics_url):
    registry.write_state(launch.ServerState(name="gpu-node", url=metrics_url, attached=True, method="speculative", k=3))
    at = run_clean(runs_page)
    at = run_clean(at.radio(key="runs_mode").set_value("Servers already running"))
    choice = at.multiselect(key="runs_servers")
    assert choice.options == ["gpu-node (speculative K=3)"]
    assert not [w for w in at.text_input if w.key == "runs_ks"]  # K is each server's own


def test_a_set_with_response_formats_runs_free_and_constrained_by_default(runs_page):
    at = run_clean(runs_page)
    assert at.radio(key="runs_structured").value == "free" and at.radio(key="runs_structured").disabled
    with_formats = next(o for o in at.selectbox(key="runs_set").options if o == "sample: json-extraction.jsonl")
    at = run_clean(at.selectbox(key="runs_set").set_value(with_formats))
    assert at.radio(key="runs_structured").value == "both" and not at.radio(key="runs_structured").disabled


def test_the_form_says_what_start_will_run_and_enter_in_a_field_starts_nothing(runs_page):
    """The issue: Enter in "K values" started a sweep with the other fields at their defaults. A field's new
    value (Enter commits it) only changes the sentence of what Start runs; only Start starts."""
    from ui.jobs import sweep_jobs

    at = run_clean(runs_page)
    said = " ".join(i.value for i in at.info if i.value.startswith("**Start sweep runs**"))
    # the bundled set's defaults: none and ngram at K 1, 2, 4, concurrency 1 and 4
    assert "cells on 4 servers \\(none; ngram K=1, 2, 4\\) at concurrency 1 and 4" in said, said
    at = run_clean(at.text_input(key="runs_ks").set_value("2"))  # typed, then Enter
    said = " ".join(i.value for i in at.info if i.value.startswith("**Start sweep runs**"))
    assert "on 2 servers \\(none; ngram K=2\\)" in said, said
    assert sweep_jobs() == {}  # nothing started
    at = run_clean(at.text_input(key="runs_ks").set_value("two"))
    assert at.error and not any(i.value.startswith("**Start sweep runs**") for i in at.info)  # what is wrong
    assert at.button(key="runs_start").disabled


def test_the_methods_offered_are_the_chosen_presets(runs_page):
    """The issue: the form offered eagle3 on cpu-smollm2 and refused it only after Start."""
    from specscope.engine import presets

    at = run_clean(runs_page)
    assert at.selectbox(key="runs_preset").value == "cpu-smollm2"
    assert at.multiselect(key="runs_methods").options == sorted(presets.get_preset("cpu-smollm2").methods)
    assert "eagle3" not in at.multiselect(key="runs_methods").options
    assert at.multiselect(key="runs_methods").value == ["none", "ngram"]
    at = run_clean(at.selectbox(key="runs_preset").set_value("llama31-8b"))
    gpu = sorted(presets.get_preset("llama31-8b").methods)
    assert at.multiselect(key="runs_methods").options == gpu and "eagle3" in gpu
    at = run_clean(at.multiselect(key="runs_methods").set_value(["none", "eagle3"]))
    at = run_clean(at.selectbox(key="runs_preset").set_value("cpu-smollm2"))
    assert at.multiselect(key="runs_methods").value == ["none"]  # eagle3 is no method of this preset
