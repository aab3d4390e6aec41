"""Sinks: a rendered diary in, a location out; the only stage that writes outside.

``base`` is the contract, ``folder`` the embedded default, ``hub`` the knowledge hub
(a durable spool and a delivery runner)."""
