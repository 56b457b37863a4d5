"""The program's settings, read once from the environment at the edge and passed down.

``Settings.read`` takes one snapshot of the environment (a ``.env`` file already loaded
into it by the command line) when a command starts, or when LangGraph's server builds the
graph. Everything below gets the values it needs from it, as arguments: no module under
the edge reads ``os.environ``. Flags (``--home``, ``--db``, ``--model`` ...) win over the
variables here; the command line applies them.

Variables:

- ``TRAVEL_ASSISTANT_HOME`` (else ``$XDG_DATA_HOME/travel-assistant`` or
  ``~/.local/share/travel-assistant``): the folder of the program's files.
- ``TRAVEL_ASSISTANT_DB``, ``TRAVEL_ASSISTANT_CONVERSATIONS``: the travel database and
  where conversations are kept (a path or a URL).
- ``TRAVEL_ASSISTANT_DATA``: the folder of reference files (airports, catalogues, policy).
- ``TAVILY_API_KEY``: adds web search to the primary assistant's tools.
- ``TRAVEL_ASSISTANT_SECRET``: signs the service's passenger tokens.
- ``TRAVEL_ASSISTANT_PASSENGER``: the passenger ``chat`` acts for without ``--passenger-id``.
- ``NO_COLOR``, ``TERM=dumb``: plain terminal output.
- The model endpoint and limits (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``,
  ``TRAVEL_ASSISTANT_MODEL`` ...): ``Settings.models``, parsed by
  ``assistants.models.ModelSettings`` when a command needs a model.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from assistants.models import ModelSettings

APP_NAME = "travel-assistant"
HOME_ENV = "TRAVEL_ASSISTANT_HOME"
DB_ENV = "TRAVEL_ASSISTANT_DB"
CONVERSATIONS_ENV = "TRAVEL_ASSISTANT_CONVERSATIONS"
DATA_ENV = "TRAVEL_ASSISTANT_DATA"
TAVILY_ENV = "TAVILY_API_KEY"
SECRET_ENV = "TRAVEL_ASSISTANT_SECRET"
PASSENGER_ENV = "TRAVEL_ASSISTANT_PASSENGER"
SECOND_APPROVAL_ENV = "TRAVEL_ASSISTANT_SECOND_APPROVAL_ABOVE"
# The variables a graph built for LangGraph's server depends on (server.studio).
PREFIXES = ("OPENAI_", "TRAVEL_ASSISTANT_", "TAVILY_", "XDG_DATA_HOME")


def _given(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


@dataclass(frozen=True)
class Settings:
    """What the environment says, read once.

    Attributes:
        home: The folder of the program's files.
        home_given: The home was set by ``TRAVEL_ASSISTANT_HOME`` (not the default).
        db: The travel database named by ``TRAVEL_ASSISTANT_DB``, if any.
        conversations: Where conversations are kept, by ``TRAVEL_ASSISTANT_CONVERSATIONS``.
        data_dir: The reference files' folder named by ``TRAVEL_ASSISTANT_DATA``, if any.
        tavily_api_key: The web search key, if any.
        secret: The token signing secret, if set.
        passenger_id: The passenger ``chat`` acts for when ``--passenger-id`` is not given
            (``TRAVEL_ASSISTANT_PASSENGER``), if any.
        plain: Terminal output without colour (``NO_COLOR``, ``TERM=dumb``).
        second_approval_above: The amount above which an approved action also needs a
            member of staff's yes (``TRAVEL_ASSISTANT_SECOND_APPROVAL_ABOVE``), as given;
            ``second_approval_cents`` reads it.
        env: The snapshot, for the model settings (``models``).
    """

    home: Path
    home_given: bool = False
    db: str | None = None
    conversations: str | None = None
    data_dir: Path | None = None
    tavily_api_key: str | None = None
    secret: str | None = None
    passenger_id: str | None = None
    plain: bool = False
    second_approval_above: str | None = None
    env: Mapping[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def read(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read the settings from ``env`` (the process environment by default)."""
        snapshot = dict(os.environ if env is None else env)
        home = _given(snapshot, HOME_ENV)
        if home:
            folder = Path(home).expanduser()
        else:
            xdg = _given(snapshot, "XDG_DATA_HOME")
            folder = (Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share") / (
                APP_NAME
            )
        data = _given(snapshot, DATA_ENV)
        return cls(
            home=folder,
            home_given=bool(home),
            db=_given(snapshot, DB_ENV),
            conversations=_given(snapshot, CONVERSATIONS_ENV),
            data_dir=Path(data) if data else None,
            tavily_api_key=_given(snapshot, TAVILY_ENV),
            secret=snapshot.get(SECRET_ENV),
            passenger_id=_given(snapshot, PASSENGER_ENV),
            plain=bool(snapshot.get("NO_COLOR")) or snapshot.get("TERM") == "dumb",
            second_approval_above=_given(snapshot, SECOND_APPROVAL_ENV),
            env=snapshot,
        )

    def second_approval_cents(self) -> int | None:
        """Return the amount above which staff check an approved action, in cents.

        ``None`` when unset (no second approval: the default).

        Raises:
            ValueError: It is set but is not an amount in the company's currency.
        """
        if self.second_approval_above is None:
            return None
        from db.models import CURRENCY
        from db.rules import parse_money

        try:
            return parse_money(self.second_approval_above, CURRENCY)
        except ValueError as error:
            raise ValueError(f"{SECOND_APPROVAL_ENV}: {error}") from None

    def models(self, model: str | None = None, *, max_tokens: int | None = None) -> ModelSettings:
        """Return the model endpoint and limits; ``model`` and ``max_tokens`` (flags) win.

        Raises:
            ModelConfigError: A limit is not a positive number.
        """
        from assistants.models import ModelSettings

        return ModelSettings.from_env(self.env, model, max_tokens=max_tokens)

    def key(self) -> tuple[tuple[str, str], ...]:
        """Return the variables a graph is built from: another value, another graph."""
        return tuple(sorted((k, v) for k, v in self.env.items() if k.startswith(PREFIXES)))
