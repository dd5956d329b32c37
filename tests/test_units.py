import math

import pytest

from shoal import UsageError, units


@pytest.mark.parametrize("text,seconds", [("256ms", 0.256), ("2s", 2.0), ("10us", 1e-5),
                                          ("1.5", 1.5), ("1min", 60.0), ("0s", 0.0)])
def test_durations(text, seconds):
    assert units.parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text,nbytes", [("1KiB", 1024), ("4MiB", 4 << 20), ("212164", 212164),
                                         ("1kB", 1000), ("2GiB", 2 << 30)])
def test_sizes(text, nbytes):
    assert units.parse_size(text) == nbytes


def test_rates_and_fractions():
    assert units.parse_rate("150Mbit") == pytest.approx(150e6 / 8)
    assert units.parse_fraction("20%") == pytest.approx(0.2)
    assert units.parse_fraction("0.05") == pytest.approx(0.05)


@pytest.mark.parametrize("call", [lambda: units.parse_duration("-1ms"),
                                  lambda: units.parse_duration("3 parsecs"),
                                  lambda: units.parse_size("1.5B"),
                                  lambda: units.parse_fraction("120%"),
                                  lambda: units.parse_count("x"),
                                  lambda: units.expand_sweep("1:5"),
                                  lambda: units.expand_sweep("10%:5%:1%"),
                                  lambda: units.expand_sweep("1,,2")])
def test_bad_input_says_what_to_change(call):
    with pytest.raises(UsageError) as err:
        call()
    assert len(str(err.value)) > 20


def test_sweeps():
    assert units.expand_sweep("1024,2048") == ["1024", "2048"]
    assert units.expand_sweep("10%:30%:10%") == ["10%", "20%", "30%"]
    assert units.expand_sweep("1:3:1,8") == ["1", "2", "3", "8"]


def test_formatting():
    assert units.format_duration(0.000123) == "123 µs"
    assert units.format_duration(math.inf) == "∞"
    assert units.format_bytes(212164) == "207 KiB"
    assert units.format_bytes(100) == "100 B"
