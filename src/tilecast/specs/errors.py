"""Errors for people: they name the file, the field and the value."""

from tilecast.errors import UserError


class SpecError(UserError):
    """A catalog file is invalid (names file, field and value)."""


class UnknownSpecError(UserError, KeyError):
    """A GPU or model that the catalog does not know (lists the closest known ones)."""

    def __str__(self) -> str:  # KeyError quotes its message; people read this one
        return str(self.args[0]) if self.args else ""
