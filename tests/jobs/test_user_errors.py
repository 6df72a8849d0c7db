"""``tilecast.cli.user_errors``: the one place where the jobs turn a user error into ``error: ...`` and exit 2."""

import pytest

from tilecast.cli import TRACEBACK_ENV, user_errors
from tilecast.errors import UserError
from tilecast.specs import UnknownSpecError


def _raise(exc: BaseException):
    @user_errors()
    def job() -> None:
        raise exc

    return job


@pytest.mark.parametrize("exc, line", [
    (UserError("batch=<n> required\n  (see conf/predict.yaml)"), "error: batch=<n> required (see conf/predict.yaml)"),
    (UnknownSpecError("unknown GPU 'l44'; closest known: l4"), "error: unknown GPU 'l44'; closest known: l4"),
    (FileNotFoundError("input table x.csv does not exist"), "error: input table x.csv does not exist"),
])
def test_user_errors_are_one_line_and_exit_2(capsys, exc, line):
    with pytest.raises(SystemExit) as got:
        _raise(exc)()
    assert got.value.code == 2 and got.value.__suppress_context__  # raised "from None": no chained traceback
    assert capsys.readouterr().err == line + "\n"


def test_registry_errors_are_user_errors(capsys):
    from tilecast.registry.models import RegistryError

    with pytest.raises(SystemExit) as got, user_errors():
        raise RegistryError("tilecast-bmm has no alias @nightly; create it with `python jobs/train.py`")
    assert got.value.code == 2 and capsys.readouterr().err.startswith("error: tilecast-bmm has no alias")


def test_bugs_keep_their_traceback(capsys):
    with pytest.raises(KeyError, match="models"):
        _raise(KeyError("models"))()
    with pytest.raises(ZeroDivisionError):
        _raise(ZeroDivisionError())()
    assert capsys.readouterr().err == ""


def test_extra_types_and_the_traceback_switch(monkeypatch):
    with pytest.raises(SystemExit), user_errors(KeyError):
        raise KeyError("bad key")
    monkeypatch.setenv(TRACEBACK_ENV, "1")
    with pytest.raises(UserError, match="bad value"), user_errors():
        raise UserError("bad value")
