"""Issue 27 item 16: one user-error base class. Every named error class of the project derives from
``tilecast.errors.UserError`` or is a bug's (not a user error); no two classes share a name; a bare
``ValueError`` (a bug) keeps its traceback and never becomes a silent exit 2."""

import ast
import importlib

import pytest

from tilecast.cli import USER_ERRORS, is_user_error, user_errors
from tilecast.errors import UserError
from tilecast.paths import ROOT

SRC = ROOT / "src" / "tilecast"
#: error classes that are not user errors on purpose (a refusal the job reports itself, a bug's)
NOT_USER_ERRORS = {"PromotionRefused", "TraceError", "_BadConfig"}


def _classes() -> list[tuple[str, str]]:
    """(module, class name) of every class defined at module level under src/tilecast."""
    out = []
    for path in sorted(SRC.rglob("*.py")):
        module = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                out.append((module, node.name))
    return out


def test_no_two_classes_share_a_name():
    seen: dict[str, str] = {}
    dupes = []
    for module, name in _classes():
        if name in seen:
            dupes.append(f"{name}: {seen[name]} and {module}")
        seen[name] = module
    assert not dupes, dupes


def test_every_error_class_is_a_user_error():
    bad = []
    for module, name in _classes():
        if not name.endswith(("Error", "Refused")) or name in NOT_USER_ERRORS or module.endswith("__main__"):
            continue
        cls = getattr(importlib.import_module(module), name)
        if isinstance(cls, type) and issubclass(cls, BaseException) and not issubclass(cls, UserError):
            bad.append(f"{module}.{name}")
    assert not bad, bad


def test_a_bare_value_error_is_a_bug_not_a_user_error(capsys):
    assert ValueError not in USER_ERRORS and not is_user_error(ValueError("a bug"))
    assert is_user_error(UserError("a mistake")) and is_user_error(PermissionError(13, "Permission denied", "/r/x"))
    with pytest.raises(ValueError, match="a bug"), user_errors():
        raise ValueError("a bug")
    with pytest.raises(SystemExit) as exited, user_errors():
        raise UserError("a mistake")
    assert exited.value.code == 2 and capsys.readouterr().err == "error: a mistake\n"


def test_no_bare_value_error_is_raised_for_people_in_the_jobs():
    """The job entry points raise named user errors only (a ValueError there would now be a traceback)."""
    for path in sorted((ROOT / "jobs").glob("*.py")):
        assert "raise ValueError(" not in path.read_text(), path.name


