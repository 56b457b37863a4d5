"""The program's settings: its flags, the environment and ``.env``, read once at the edge.

``Settings.read`` is called once: by the command line (``cli.main``, with its flags) or by
LangGraph's server (``server.studio``). Everything below gets what it needs from the one
object it returns, as arguments; no module under the edge reads ``os.environ``. A flag
(``--home``, ``--db``, ``--conversations``, ``--model``, ``--max-tokens``) wins over its
variable, a variable over the ``.env`` file of the current folder, that file over the
default; a blank variable counts as unset. Each field names its variable (its alias);
``TRAVEL_ASSISTANT_MODEL_<ASSISTANT>`` and ``TRAVEL_ASSISTANT_MAX_TOKENS_<ASSISTANT>``
(for example ``TRAVEL_ASSISTANT_MAX_TOKENS_BOOK_HOTEL``) are one assistant's own.
"""

from __future__ import annotations

import json
from dataclasses import fields
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import (
    AfterValidator,
    AliasChoices,
    BeforeValidator,
    Field,
    PlainValidator,
    PrivateAttr,
    ValidationError,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo

    from assistants.models import ModelSettings
    from locations import Location

APP_NAME = "travel-assistant"
DB_ENV = "TRAVEL_ASSISTANT_DB"
CONVERSATIONS_ENV = "TRAVEL_ASSISTANT_CONVERSATIONS"
SECRET_ENV = "TRAVEL_ASSISTANT_SECRET"
SECOND_APPROVAL_ENV = "TRAVEL_ASSISTANT_SECOND_APPROVAL_ABOVE"
# The prefixes of one assistant's own model and reply limit: the aliases of their fields.
PER_ASSISTANT = ("TRAVEL_ASSISTANT_MODEL_", "TRAVEL_ASSISTANT_MAX_TOKENS_")


def export_env_file(folder: Path | None = None) -> None:
    """Put the ``.env`` file of ``folder`` (the working folder) into the environment.

    The settings read it themselves; this is for the libraries, which read only the
    environment (LangSmith, libpq, proxies). A variable already set keeps its value.
    """
    env_file = (folder or Path.cwd()) / ".env"
    if env_file.is_file():
        from dotenv import load_dotenv

        load_dotenv(env_file, override=False)


class SettingsError(ValueError):
    """A setting the program cannot use: the message names the flag or variable."""


def _positive(kind: type[int] | type[float], what: str) -> PlainValidator:
    def read(value: object) -> int | float:
        try:
            number = kind(str(value).strip())
        except ValueError:
            number = 0
        if not number > 0:
            raise ValueError(f"must be a positive {what}, not {value!r}")
        return number

    return PlainValidator(read)


PositiveInt = Annotated[int, _positive(int, "whole number")]
PositiveFloat = Annotated[float, _positive(float, "number")]
Folder = Annotated[Path, AfterValidator(Path.expanduser)]


class _PerAssistant(PydanticBaseSettingsSource):
    """The variables that start with a prefix of ``PER_ASSISTANT``, by assistant.

    The environment's win over the ``.env`` file's; blank ones count as unset.
    """

    def __init__(self, settings_cls: type[BaseSettings], *sources: PydanticBaseSettingsSource):
        super().__init__(settings_cls)
        self.given: dict[str, str | None] = {}
        for source in sources:  # .env first, the environment over it
            self.given.update(getattr(source, "env_vars", {}))

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """Find nothing field by field: ``__call__`` reads the prefixes."""
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return {
            prefix: {
                name.removeprefix(prefix).lower(): value
                for name, value in self.given.items()
                if name.startswith(prefix) and value and value.strip()
            }
            for prefix in PER_ASSISTANT
        }


class Settings(BaseSettings):
    """Every setting, typed, read once (``read``); the flags given are in ``flags``.

    ``db`` and ``conversations`` are as given; ``db_location`` and
    ``conversations_location`` are where they are (the home's files by default), found
    once. ``models`` is the model endpoint and its limits, with the defaults applied.
    """

    model_config = SettingsConfigDict(
        env_file=".env",
        case_sensitive=True,
        extra="ignore",
        frozen=True,
        validate_by_name=True,
        str_strip_whitespace=True,
    )

    xdg_data_home: Folder = Field(
        default_factory=lambda: Path.home() / ".local" / "share", alias="XDG_DATA_HOME"
    )
    home: Folder = Field(
        default_factory=lambda data: data["xdg_data_home"] / APP_NAME,
        alias="TRAVEL_ASSISTANT_HOME",
    )
    db: str | None = Field(None, alias="TRAVEL_ASSISTANT_DB")
    conversations: str | None = Field(None, alias="TRAVEL_ASSISTANT_CONVERSATIONS")
    data_dir: Path | None = Field(None, alias="TRAVEL_ASSISTANT_DATA")
    tavily_api_key: str | None = Field(None, alias="TAVILY_API_KEY")
    secret: str | None = Field(None, alias="TRAVEL_ASSISTANT_SECRET")
    passenger_id: str | None = Field(None, alias="TRAVEL_ASSISTANT_PASSENGER")
    # The terminal desk is a client of the service: its address and a staff token.
    server: str | None = Field(None, alias="TRAVEL_ASSISTANT_SERVER")
    token: str | None = Field(None, alias="TRAVEL_ASSISTANT_TOKEN")
    # Staff signing in with the company's identity provider (OpenID Connect): see
    # docs/configuration.md. Off unless an issuer is set.
    oidc_issuer: str | None = Field(None, alias="TRAVEL_ASSISTANT_OIDC_ISSUER")
    oidc_audience: str | None = Field(None, alias="TRAVEL_ASSISTANT_OIDC_AUDIENCE")
    oidc_jwks_url: str | None = Field(None, alias="TRAVEL_ASSISTANT_OIDC_JWKS_URL")
    oidc_login_claim: str = Field("email", alias="TRAVEL_ASSISTANT_OIDC_LOGIN_CLAIM")
    oidc_name_claim: str = Field("name", alias="TRAVEL_ASSISTANT_OIDC_NAME_CLAIM")
    oidc_role_claim: str = Field("roles", alias="TRAVEL_ASSISTANT_OIDC_ROLE_CLAIM")
    oidc_agent_role: str = Field("agent", alias="TRAVEL_ASSISTANT_OIDC_AGENT_ROLE")
    oidc_supervisor_role: str = Field("supervisor", alias="TRAVEL_ASSISTANT_OIDC_SUPERVISOR_ROLE")
    second_approval_above: str | None = Field(None, alias="TRAVEL_ASSISTANT_SECOND_APPROVAL_ABOVE")
    no_color: Annotated[bool, BeforeValidator(bool)] = Field(False, alias="NO_COLOR")
    term: str = Field("", alias="TERM")
    # The model endpoint and limits, as given: ``models`` applies ModelSettings' defaults.
    model: str | None = Field(None, alias="TRAVEL_ASSISTANT_MODEL")
    model_overrides: dict[str, str] = Field({}, alias="TRAVEL_ASSISTANT_MODEL_")
    api_key: str | None = Field(None, alias="OPENAI_API_KEY")
    base_url: str | None = Field(
        None, validation_alias=AliasChoices("OPENAI_BASE_URL", "OPENAI_API_BASE")
    )
    max_tokens: PositiveInt | None = Field(None, alias="TRAVEL_ASSISTANT_MAX_TOKENS")
    max_tokens_overrides: dict[str, PositiveInt] = Field({}, alias="TRAVEL_ASSISTANT_MAX_TOKENS_")
    context_tokens: PositiveInt | None = Field(None, alias="TRAVEL_ASSISTANT_CONTEXT_TOKENS")
    reply_seconds: PositiveFloat | None = Field(None, alias="TRAVEL_ASSISTANT_REPLY_TIMEOUT")
    timeout: PositiveFloat | None = Field(None, alias="TRAVEL_ASSISTANT_TIMEOUT")
    flags: frozenset[str] = frozenset()
    _db: Location = PrivateAttr()
    _conversations: Location = PrivateAttr()

    @classmethod
    def read(cls, **flags: Any) -> Settings:
        """Read the settings; the ``flags`` given (``db`` for ``--db`` ...) win.

        Raises:
            SettingsError: A value the program cannot use.
        """
        given = {name: value for name, value in flags.items() if value}
        try:
            return cls(**given, flags=frozenset(given))
        except ValidationError as error:
            raise SettingsError(_said(error)) from None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Read the flags, the environment, ``.env`` and one assistant's own variables."""
        per_assistant = _PerAssistant(settings_cls, dotenv_settings, env_settings)
        return init_settings, env_settings, dotenv_settings, per_assistant

    @model_validator(mode="before")
    @classmethod
    def _blank_is_unset(cls, given: dict[str, Any]) -> dict[str, Any]:
        """Drop blank values; a blank secret stays, to be refused as too short."""
        return {
            name: value
            for name, value in given.items()
            if name in ("secret", SECRET_ENV) or not (isinstance(value, str) and not value.strip())
        }

    def model_post_init(self, context: Any) -> None:
        """Find the travel database and the conversations: a bad location is said now."""
        self._db = self._locate("db", DB_ENV, "travel.sqlite")
        self._conversations = self._locate("conversations", CONVERSATIONS_ENV, "sessions.sqlite")

    def _locate(self, name: str, variable: str, default: str) -> Location:
        from locations import Location, LocationError

        given: str | None = getattr(self, name)
        said = f"--{name}" if name in self.flags else variable if given else "--home"
        try:
            location = Location.parse(given or self.home / default)
            location.check_driver()
        except LocationError as error:
            raise SettingsError(f"{said}: {error}") from None
        return location

    def __hash__(self) -> int:
        """Hash the values (LangGraph's server keeps a graph per settings, ``server.studio``)."""
        return hash(json.dumps(self.model_dump(mode="json", exclude={"flags"}), sort_keys=True))

    @property
    def home_given(self) -> bool:
        """Tell whether ``--home`` or ``TRAVEL_ASSISTANT_HOME`` named the home."""
        return "home" in self.model_fields_set

    @property
    def db_location(self) -> Location:
        """Return the travel database: ``--db``, its variable, or the home's file."""
        return self._db

    @property
    def conversations_location(self) -> Location:
        """Return where conversations are kept: ``--conversations``, its variable, the home."""
        return self._conversations

    @property
    def plain(self) -> bool:
        """Tell whether terminal output is plain (``NO_COLOR``, ``TERM=dumb``)."""
        return self.no_color or self.term == "dumb"

    @cached_property
    def models(self) -> ModelSettings:
        """Return the model endpoint and limits: those given, the defaults for the rest."""
        from assistants.models import ModelSettings

        given = {field.name: getattr(self, field.name) for field in fields(ModelSettings)}
        return ModelSettings(**{name: value for name, value in given.items() if value is not None})

    def second_approval_cents(self) -> int | None:
        """Return the amount above which staff check an approved action, in cents.

        ``None`` when unset (no second approval: the default). Read when asked, not with
        the rest: the currency comes with the database's models, slow to import.

        Raises:
            SettingsError: It is set but is not an amount in the company's currency.
        """
        if self.second_approval_above is None:
            return None
        from db.models import CURRENCY
        from db.rules import parse_money

        try:
            return parse_money(self.second_approval_above, CURRENCY)
        except ValueError as error:
            raise SettingsError(f"{SECOND_APPROVAL_ENV}: {error}") from None


def _said(error: ValidationError) -> str:
    """Say the first problem of ``error``: its variable (its flag), then what is wrong."""
    problem = error.errors()[0]
    reason = problem.get("ctx", {}).get("error", problem["msg"])
    if isinstance(reason, SettingsError):  # said whole (``_locate``)
        return str(reason)
    name, *key = (str(part) for part in problem["loc"])
    return f"{name}{''.join(key).upper()} {reason}."
