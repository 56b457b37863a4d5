"""The one form of a member of staff's login: what the desk compares, keeps and records.

Its own module, with nothing but the standard library: the service verifies every staff
token with it, and a command's input errors must not wait for SQLAlchemy to load.
"""

from __future__ import annotations

import unicodedata


def canonical_login(login: str) -> str:
    """Return the one form of a member of staff's login that the desk compares and records.

    Unicode NFKC-normalised, case-folded and normalised again (what Unicode calls a
    compatibility caseless match: ``ＡＮＡ@Example.com``, ``ANA@example.com`` and
    ``ana@example.com`` are one login), its blanks collapsed to one space and stripped.
    The same function is used where a token is verified and wherever the desk keeps or
    compares a login, so no two spellings of one login are ever two people.
    """
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", login).casefold())
    return " ".join(folded.split())
