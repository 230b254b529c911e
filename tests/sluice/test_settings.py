"""Settings read from the environment: the sluice pool's name and slots."""

from __future__ import annotations

import pytest

from sluice.settings import load_settings, pool_slots


def test_the_pool_is_sluice_with_a_slot_per_driver_the_memory_holds_unless_told():
    assert load_settings({}).airflow_pool == "sluice"
    # one driver: 2 GiB of heap and the JVM's own, 2.5 GiB
    assert [pool_slots(None, gib * 2**30) for gib in (1, 2.5, 8, 24)] == [1, 1, 3, 9]
    assert pool_slots("", 24 * 2**30) == 9
    told = load_settings({"SLUICE_AIRFLOW_POOL": "lake_drivers", "SLUICE_POOL_SLOTS": " 3 "})
    assert (told.airflow_pool, told.pool_slots) == ("lake_drivers", 3)


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5"])
def test_pool_slots_that_are_no_whole_number_from_one_are_refused(value):
    with pytest.raises(ValueError) as refused:
        load_settings({"SLUICE_POOL_SLOTS": value})
    assert str(refused.value) == (
        f"SLUICE_POOL_SLOTS={value!r} is not a number of slots: give a whole number >= 1, the spark-submits one "
        "worker runs at once (e.g. SLUICE_POOL_SLOTS=4), or unset it to size it from the machine's memory")


def test_a_pool_name_airflow_would_not_take_is_refused():
    with pytest.raises(ValueError) as refused:
        load_settings({"SLUICE_AIRFLOW_POOL": "my pool"})
    assert str(refused.value) == ("SLUICE_AIRFLOW_POOL='my pool' is not a pool name: use letters, digits, '_', "
                                  "'.' or '-' (e.g. SLUICE_AIRFLOW_POOL=sluice), or unset it")
