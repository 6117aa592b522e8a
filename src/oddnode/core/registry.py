"""Things of one kind registered by name: the steps a check runs, the
transports that reach nodes, the parsers of tools' outputs, the finding
rules.  Each kind has one ``Registry``, filled from one list in its package
(``oddnode.parsers.TOOL_PARSERS``, ``oddnode.measure.catalog.CATALOG``, the
modules ``oddnode.reach`` and ``oddnode.findings`` import) so that what is
registered does not depend on what was imported first; users look things
up by name, getting an error that lists the known names when there is none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(KeyError):
    """A name that nothing of a registry's kind was registered under."""

    def __init__(self, kind: str, name: str, known: list[str]) -> None:
        self.kind, self.name, self.known = kind, name, known
        self.message = f"no {kind} named {name!r} (known: {', '.join(known) or 'none'})"
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


class Registry(Generic[T]):
    """Named things of one kind, in registration order."""

    def __init__(self, kind: str, error: type[UnknownNameError] = UnknownNameError) -> None:
        self.kind = kind
        self._error = error
        self._items: dict[str, T] = {}

    def add(self, name: str, item: T) -> T:
        """Register ``item`` under ``name``; a name is registered once."""
        if name in self._items:
            raise ValueError(f"a {self.kind} named {name!r} is already registered")
        self._items[name] = item
        return item

    def remove(self, name: str) -> T:
        """Unregister ``name`` (a plug-in withdrawn, a test's own step)."""
        item = self.get(name)
        del self._items[name]
        return item

    def register(self, name: str) -> Callable[[T], T]:
        """A decorator registering what it decorates under ``name``."""
        return lambda item: self.add(name, item)

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise self._error(self.kind, name, list(self._items)) from None

    __getitem__ = get

    def names(self) -> list[str]:
        return list(self._items)

    def items(self) -> list[tuple[str, T]]:
        return list(self._items.items())

    def values(self) -> list[T]:
        return list(self._items.values())

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)
