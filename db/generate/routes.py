"""The route type, and the fixture routes that every schedule flies.

The fixture tickets of ``db.fixtures`` fly these routes; ``db.generate.reference`` checks
that the reference data can hold them, and ``db.generate.schedule`` adds random routes to
them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import time

from db import fixtures as fx


@dataclass(frozen=True)
class _Route:
    """One daily flight number: where, when (local time at the origin) and on what.

    ``local_departure`` of ``None`` means the time is derived from "now" (fixtures).
    """

    flight_no: str
    origin: str
    destination: str
    aircraft_code: str
    local_departure: time | None
    fixture: bool = False


# The fixture routes, both directions. LX0112 must come first (see
# db.generate.reference._check_reference_data).
_FIXTURE_ROUTES: tuple[_Route, ...] = (
    _Route(fx.FIXTURE_FLIGHT_NO, *fx.FIXTURE_ROUTE, "320", None, fixture=True),
    _Route("LX0113", fx.FIXTURE_ROUTE[1], fx.FIXTURE_ROUTE[0], "320", time(7, 5), True),
    _Route("LH2012", "MUC", "FRA", "321", time(7, 10), True),
    _Route("LH2013", "FRA", "MUC", "321", time(18, 20), True),
    _Route("LH0400", "FRA", "JFK", "359", time(10, 25), True),
    _Route("LH0401", "JFK", "FRA", "359", time(17, 45), True),
    _Route("LX0318", "ZRH", "LHR", "320", time(8, 40), True),
    _Route("LX0319", "LHR", "ZRH", "320", time(12, 5), True),
    _Route("KL1675", "AMS", "BCN", "738", time(9, 15), True),
    _Route("KL1676", "BCN", "AMS", "738", None, True),
)
_FIXTURE_FLIGHT, _, _MUC_FRA, _, _FRA_JFK, _, _ZRH_LHR, _, _AMS_BCN, _BCN_AMS = _FIXTURE_ROUTES
