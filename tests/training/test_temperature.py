"""MVR Eq. 8: tau = max(0.3, exp(-alpha t)), stepped once per epoch."""

import math

import pytest

from haystack_mvr.training.losses import annealed_temperature


def test_steps_once_per_epoch_as_in_the_paper():
    assert annealed_temperature(0.0) == 1.0
    assert annealed_temperature(0.99) == 1.0
    assert annealed_temperature(1.0) == pytest.approx(math.exp(-0.1))
    assert annealed_temperature(1.7) == pytest.approx(math.exp(-0.1))
    assert annealed_temperature(5.2) == pytest.approx(math.exp(-0.5))


def test_floor_is_reached_after_13_epochs_with_alpha_0_1():
    assert annealed_temperature(12) == pytest.approx(math.exp(-1.2))  # 0.3012 > 0.3
    assert annealed_temperature(13) == 0.3
    assert annealed_temperature(40) == 0.3


def test_alpha_minimum_and_continuous_mode():
    assert annealed_temperature(2, alpha=0.3) == pytest.approx(math.exp(-0.6))
    assert annealed_temperature(100, alpha=0.03, minimum=0.5) == 0.5
    assert annealed_temperature(0.5, per_epoch=False) == pytest.approx(math.exp(-0.05))
    assert annealed_temperature(3, alpha=0.0) == 1.0


@pytest.mark.parametrize("kwargs", [{"epoch": -1}, {"epoch": 1, "alpha": -0.1}, {"epoch": 1, "minimum": 0}])
def test_invalid_arguments(kwargs):
    with pytest.raises(ValueError):
        annealed_temperature(**kwargs)
