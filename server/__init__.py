"""The HTTP service and the web chat: ``travel-assistant serve``.

``server.app`` builds the FastAPI application over a ``conversations.TravelAssistant``
from the customer's routes (``server.customer_api``), the supervisor's
(``server.supervisor``) and the desk's (``server.handoff``), inside the layers of
``server.middleware``. ``server.auth`` issues and checks the passengers' signed tokens,
``server.schemas`` holds the request, response and event models of the API,
``server.service`` serves the conversations (and refuses with ``server.errors``),
``server.runs`` runs their turns as tasks of the event loop and keeps each turn's events
for the clients that follow it, ``server.records_out`` turns the protocol's records into
the API's models, and ``server/static`` is the web chat page. ``server.studio`` is the
graph factory that LangGraph's own tooling loads (``langgraph.json``).

``server.startup`` is what ``serve`` listens with while it builds the assistant in the
background (the health check answers at once; requests that need the assistant wait).

``server.limits`` bounds slow and numerous clients (its defaults are plain numbers, which
the command line reads for its help).

Importing this package builds nothing; the command imports it only when it is used.
"""
