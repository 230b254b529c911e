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


def test_the_shared_driver_is_off_unless_told_and_its_folder_and_idle_time_are_read():
    default = load_settings({})
    assert (default.shared_driver, default.shared_driver_idle_seconds) == ("off", 300.0)
    assert default.shared_driver_dir.name.startswith("sluice-drivers-")
    told = load_settings({"SLUICE_SHARED_DRIVER": " Host ", "SLUICE_SHARED_DRIVER_DIR": "/srv/sluice/drivers",
                          "SLUICE_SHARED_DRIVER_IDLE_SECONDS": "90"})
    assert (told.shared_driver, str(told.shared_driver_dir), told.shared_driver_idle_seconds) == (
        "host", "/srv/sluice/drivers", 90.0)


def test_a_shared_driver_that_is_no_choice_or_an_idle_time_that_is_no_number_is_refused():
    with pytest.raises(ValueError) as refused:
        load_settings({"SLUICE_SHARED_DRIVER": "yes"})
    assert str(refused.value) == ("SLUICE_SHARED_DRIVER='yes' is not a choice: set it to 'host' (runs handed to "
                                  "this host's long-lived driver) or 'off' (a spark-submit per run), or unset it")
    for value in ("0", "-5", "soon"):
        with pytest.raises(ValueError) as refused:
            load_settings({"SLUICE_SHARED_DRIVER_IDLE_SECONDS": value})
        assert str(refused.value) == (
            f"SLUICE_SHARED_DRIVER_IDLE_SECONDS={value!r} is not a number of seconds: give one > 0, how long a host "
            "driver waits for its next job before it stops (e.g. 300), or unset it")
