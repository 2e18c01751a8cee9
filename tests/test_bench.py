"""The benchmark's in-process part still runs and still checks every answer (so it cannot rot).

The benchmark itself (`python -m bench`) is not part of the suite: these run a few requests.
"""

from itertools import count

import pytest

from bench import inprocess
from bench.environs import InvalidRun, replay


def case_named(name: str) -> inprocess.Case:
    return next(case for case in inprocess.cases() if case.name == name)


def test_the_in_process_part_measures_every_case():
    medians = inprocess.measure(rounds=2, batch=5)
    assert set(medians) == {"floor", "success", "400", "401"}
    assert all(microseconds > 0 for microseconds in medians.values())


@pytest.mark.parametrize("name", ["floor", "success", "400", "401"])
def test_each_case_gets_the_status_it_is_measured_for(name):
    case = case_named(name)
    replay(case.app, case.environs(count(), 3), case.expected)


def test_an_answer_with_another_status_makes_the_run_invalid():
    unauthorized = case_named("401")
    with pytest.raises(InvalidRun, match="answered 401, not 200"):
        replay(unauthorized.app, unauthorized.environs(count(), 3), 200)


def test_every_success_creates_a_plant_of_its_own():
    success = case_named("success")
    replay(success.app, success.environs(count(), 3), 200)
    other_content = success.replayer.environ(b'{"id": 2, "name": "other"}')
    replay(success.app, [other_content], 409)
