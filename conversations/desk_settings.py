"""The desk's settings: what every process on these conversations must agree on.

Today one: the second approval's amount (cents), above which an action the customer
approved waits for a member of staff (``conversations.desk_checks``). It is read from the
store at every decision: one amount for every process at every moment.
"""

from __future__ import annotations

import sqlalchemy as sa

from conversations.desk_rows import DeskError, DeskStoreError, metadata

# What every process on these conversations must agree on, kept with them.
SETTINGS = sa.Table(
    "travel_desk_settings",
    metadata,
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)
_CHECK_ABOVE = "second_approval_above_cents"


class CheckAmountDisagreesError(DeskError):
    """A process was started with another second-approval amount than the store keeps."""

    def __init__(self, stored: int, given: int) -> None:
        """Say both amounts (cents)."""
        super().__init__(f"{stored} != {given}")
        self.stored = stored
        self.given = given


class DeskSettings:
    """The settings kept with the conversations, on the desk's engine."""

    engine: sa.Engine

    def agree_check_above(self, given: int | None) -> int | None:
        """Return the second approval's amount (cents) every process here must use.

        The amount is kept with the conversations: the first process started with one
        keeps it; a process started without one uses it; ``None`` while none is kept.

        Raises:
            CheckAmountDisagreesError: ``given`` is another amount than the one kept.
        """
        for _ in range(2):  # another process may keep one in between: read it then
            try:
                with self.engine.begin() as connection:
                    stored = self._check_above(connection)
                    if stored is None and given is not None:
                        insert = SETTINGS.insert().values(key=_CHECK_ABOVE, value=str(given))
                        connection.execute(insert)
                        return given
            except sa.exc.IntegrityError:
                continue
            if stored is None or given is None or given == stored:
                return stored
            raise CheckAmountDisagreesError(stored, given)
        raise DeskStoreError("The second approval's amount could not be kept; try again.")

    def check_above(self) -> int | None:
        """Return the second approval's amount (cents) kept now; ``None`` while none is.

        Every decision reads it here, so a change applies to every process at once.
        """
        with self.engine.connect() as connection:
            return self._check_above(connection)

    def set_check_above(self, cents: int | None) -> None:
        """Keep ``cents`` as the second approval's amount (``None``: no second approval).

        Processes already running use it from their next decision on: none keeps an
        amount of its own.
        """
        with self.engine.begin() as connection:
            connection.execute(SETTINGS.delete().where(SETTINGS.c.key == _CHECK_ABOVE))
            if cents is not None:
                connection.execute(SETTINGS.insert().values(key=_CHECK_ABOVE, value=str(cents)))

    def _check_above(self, connection: sa.Connection) -> int | None:
        value = connection.execute(_READ_CHECK_ABOVE).scalar()
        return int(value) if value is not None else None


# Read at every decision: built once.
_READ_CHECK_ABOVE = sa.select(SETTINGS.c.value).where(SETTINGS.c.key == _CHECK_ABOVE)
