"""report.html of an R-Zero run (rzero.math.page): what an empty panel says. No model runs
here: the run directory is empty."""

from rzero.config import load_config
from rzero.math.page import _challenger_panels
from rzero.rundir import RunDir


def test_an_untrained_challengers_panels_say_why_they_are_empty(tmp_path):
    run = RunDir(tmp_path)
    untrained = load_config(None, ["roles.train_challenger=false"])
    trained = load_config(None, [])
    assert {p.empty_text for p in _challenger_panels(run, untrained)} == {
        "the challenger does not train\n(roles.train_challenger is off)"
    }
    assert {p.empty_text for p in _challenger_panels(run, trained)} == {"no data"}
