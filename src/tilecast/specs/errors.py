"""Errors for people: they name the file, the field and the value."""


class SpecError(ValueError):
    """A catalog file is invalid (names file, field and value)."""


class UnknownSpecError(KeyError):
    """A GPU or model that the catalog does not know (lists the closest known ones)."""

    def __str__(self) -> str:  # KeyError quotes its message; people read this one
        return str(self.args[0]) if self.args else ""
