"""What a statement costs through each way of reaching Postgres (docs/deployment.md "Behind
pgbouncer"): one indexed read, timed one at a time on

- `asyncpg`: asyncpg's own pool, direct (the floor);
- `direct`: Cairn's read-only pool, direct (bounded acquires, read-only per session);
- `bouncer_plain`: a pool with no session state behind pgbouncer (transaction mode): the hop;
- `bouncer_read_only`: the API's read pool behind pgbouncer (`BEGIN READ ONLY`, the statement,
  `COMMIT`);
- `bouncer_rate`: the rate limiter's pool behind pgbouncer (`BEGIN`, `set_config`, the
  statement, `COMMIT`),

interleaved one for one so every kind sees the same load on a shared machine.

    .venv/bin/python bench/pooler.py [--count 2000]

Starts Postgres (pgserver) and pgbouncer (the Debian package) in a temp dir. Prints JSON and
writes bench/results/pooler.json.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

RESULTS = Path(__file__).parent / "results" / "pooler.json"
READ = "SELECT version, name FROM schema_migrations WHERE version = $1"


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1], 3),
        "mean_ms": round(statistics.fmean(ordered), 3),
    }


async def main(count: int) -> dict[str, Any]:
    import asyncpg

    from infra.db import create_pool, migrate
    from infra.devstack import PgBouncer, Postgres, ServerAddress, database_of, free_port, run_as

    root = Path(tempfile.mkdtemp(prefix="cairn-pooler-"))
    os.chmod(root, 0o755)  # the server and pgbouncer run as the wheel's user under root
    postgres = Postgres(root / "pg")
    postgres.start()
    bouncer = PgBouncer(
        ServerAddress.of(postgres.dsn()), root / "bouncer", free_port(), user_id=run_as(postgres)
    )
    try:
        dsn = postgres.ensure_database("cairn_pooler")
        await migrate(dsn)
        bouncer.start()
        via = bouncer.dsn(database_of(dsn))
        pools = {
            "asyncpg": await asyncpg.create_pool(dsn, min_size=1, max_size=1),
            "direct": await create_pool(dsn, read_only=True, min_size=1, max_size=1),
            "bouncer_plain": await create_pool(
                via, read_only=False, min_size=1, max_size=1, transaction_pooler=True
            ),
            "bouncer_read_only": await create_pool(
                via, read_only=True, min_size=1, max_size=1, transaction_pooler=True
            ),
            "bouncer_rate": await create_pool(
                via,
                read_only=False,
                min_size=1,
                max_size=1,
                transaction_pooler=True,
                session={"synchronous_commit": "off"},
            ),
        }
        samples: dict[str, list[float]] = {name: [] for name in pools}
        for n in range(count + 50):
            for name, pool in pools.items():
                start = time.perf_counter()
                row = await pool.fetchrow(READ, 1)
                elapsed = (time.perf_counter() - start) * 1000
                assert row is not None
                if n >= 50:  # warm-up: connections, codecs, plans
                    samples[name].append(elapsed)
        for pool in pools.values():
            await pool.close()
    finally:
        bouncer.stop()
        postgres.stop()
        shutil.rmtree(root, ignore_errors=True)
    return {
        "what": "one indexed read per call, one call at a time, kinds interleaved",
        "count": count,
        "machine": f"{os.cpu_count()} cores, shared",
        "pgbouncer": "Debian's, pool_mode=transaction, TCP on loopback; Postgres on its socket",
        "kinds": {name: _ms(values) for name, values in samples.items()},
    }


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=2000)
    result = asyncio.run(main(parser.parse_args().count))
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
