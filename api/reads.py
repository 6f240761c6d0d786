"""Where a read is answered: the primary, or the streaming replica of
`SERVICE_DATABASE_READ_URL`.

A replica lags its primary, so it may only answer a read that follows no write of the same
request. The route the client called decides, once (`EndpointSpec.writes_nothing`): a GET, a
HEAD or a POST declared read-only (search) writes nothing, and its reads, including those of
the routes it runs through `api.endpoint.invoke`, may come from the replica. Every other request
may have written (a create renders the row its workflow just wrote) and reads the primary, so a
response always sees its own writes without waiting for the replica to replay them. A read in a
later request may lag: what the replica has not replayed yet is not there.
"""

from __future__ import annotations

import asyncpg
from aiohttp import web

from api import keys


def reader(request: web.Request) -> asyncpg.Pool:
    """The pool of a list, get or search read for this request."""
    replica = request.app[keys.REPLICA_POOL]
    if replica is not None and request.get(keys.REPLICA_READS, False):
        return replica
    return request.app[keys.READ_POOL]
